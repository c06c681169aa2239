/* tests/proactor/backend_aio.c: being written */
