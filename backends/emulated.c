/* backends/emulated.c: being written */
