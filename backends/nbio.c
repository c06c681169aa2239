/* backends/nbio.c: being written */
