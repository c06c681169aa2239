/* tests/proactor/backend_uring.c: being written */
