/* backends/nbio.h: being written */
