/* tests/proactor/alloc.c: being written */
