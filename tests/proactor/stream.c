/* tests/proactor/stream.c: being written */
