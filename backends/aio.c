/* backends/aio.c: being written */
