/* tests/proactor/scale.c: being written */
