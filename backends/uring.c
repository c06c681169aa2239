/* backends/uring.c: being written */
