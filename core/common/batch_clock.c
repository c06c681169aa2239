/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/batch_clock.c - the per-thread time of the batch being
 * dispatched, the messages it delivered and the buffer it lends
 * (core/common/batch_clock.h).
 */
#include "config.h"

#include "core/common/batch_clock.h"

_Thread_local taxi_time_t taxi__batch_time TAXI__TLS_HOT;
_Thread_local unsigned taxi__batch_messages TAXI__TLS_HOT;
_Thread_local unsigned char *taxi__batch_scratch TAXI__TLS_HOT;
