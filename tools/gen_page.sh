#!/bin/sh
# tools/gen_page.sh - writes tools/ptserve_page.h (the playground page as one C string) from
# tools/ptserve_page.html. Run it after editing the page; the header is committed, so building
# ptserve needs no step before cc.
set -u
cd "$(dirname "$0")" || exit 1
{
  echo "/* ptserve_page.h - the playground page served at / (made by tools/gen_page.sh from tools/ptserve_page.html; do not edit) */"
  echo "static const char sv_page[] ="
  sed 's/\\/\\\\/g; s/"/\\"/g; s/^/    "/; s/$/\\n"/' ptserve_page.html
  echo "    ;"
} >ptserve_page.h
