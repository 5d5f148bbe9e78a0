# tests/cl_hide.sh - sourced by the test scripts: runs a command with OpenCL's and CLBlast's libraries
# hidden, to check that a -DPTRAIN_OPENCL program still starts, runs on the CPU, and answers a device
# request with a clear error.
#   cl_hide_setup    finds libOpenCL.so.1 and libclblast.so.1 (ldconfig -p, links resolved) and checks
#                    that a private mount namespace can be made (unshare -m: root, or a user namespace);
#                    status 0 if cl_hide can run, else 1 with the reason in CL_HIDE_WHY
#   cl_hide CMD...   runs CMD in a private mount namespace where /dev/null is bound over both files
#                    (what dlopen then says: "file too short"); the host's files are untouched
CL_HIDE_LIBS=""
CL_HIDE_WHY=""
cl_hide_setup() {
    CL_HIDE_LIBS=""
    for _ch_l in libOpenCL.so.1 libclblast.so.1; do
        _ch_p=$(ldconfig -p 2>/dev/null | awk -v l="$_ch_l" '$1 == l {print $NF}' | while read -r p; do readlink -f "$p"; done | sort -u | tr '\n' ' ')
        if [ -z "$_ch_p" ]; then CL_HIDE_WHY="$_ch_l is not installed (nothing to hide)"; return 1; fi
        CL_HIDE_LIBS="$CL_HIDE_LIBS $_ch_p"
    done
    if ! command -v unshare >/dev/null 2>&1; then CL_HIDE_WHY="no unshare (util-linux)"; return 1; fi
    if ! unshare -m sh -c "mount --bind /dev/null $(echo $CL_HIDE_LIBS | cut -d' ' -f1)" >/dev/null 2>&1; then
        CL_HIDE_WHY="cannot make a private mount namespace (unshare -m needs root)"
        return 1
    fi
    return 0
}
cl_hide() {
    # shellcheck disable=SC2016
    unshare -m sh -c 'for l in '"$CL_HIDE_LIBS"'; do mount --bind /dev/null "$l" || exit 125; done; exec "$@"' cl_hide "$@"
}
