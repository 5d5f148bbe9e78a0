/* tu_a.c - the one translation unit of a two-TU program that holds the implementation.
   It defines nothing but the library, so every global symbol of tu_a.o must be pt_* / PT_*. */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
