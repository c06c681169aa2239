/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/env.c - the environment.  Windows has no set-user-ID
 * programs (a process runs with one token, and its environment comes from
 * its parent running as the same user unless CreateProcessAsUser was
 * used, which builds a fresh one), so plain getenv() is what the POSIX
 * secure_getenv() amounts to here.
 */
#include "config.h"

#include "win32_impl.h"

#include <stdlib.h>

const char *taxi__secure_getenv(const char *name) { return getenv(name); }
