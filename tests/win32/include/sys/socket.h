/* SPDX-License-Identifier: Apache-2.0 */
/* tests/win32/include/sys/socket.h - for the Windows build of the tests: the
 * definitions the tests use from <sys/socket.h> come from tests/win32/compat.h.
 */
#include "../../compat.h"
