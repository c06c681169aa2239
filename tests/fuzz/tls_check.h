/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/tls_check.h - the invariants of taxi's TLS record path on any
 * ciphertext a peer may send, shared by the libFuzzer target
 * (tests/fuzz/tls_fuzz.c) and the CUnit program test_tls_fuzz, which runs
 * every file of tests/fuzz/tls_corpus/ through them, so that an input the
 * fuzzer found becomes a regular test by being copied into that directory.
 *
 * The bytes go into sessions of the built-in engine
 * (core/stream/tls_engine.h) the way the stream filter
 * (core/stream/stream_tls.c) drives them: the handshake stepped until it
 * needs input, the input fed, plaintext read once the handshake is done.
 */
#ifndef TAXI_TESTS_TLS_CHECK_H
#define TAXI_TESTS_TLS_CHECK_H

#include <stddef.h>

/* Makes a key and a self-signed certificate for "localhost" in memory,
 * writes them (PEM) into a new temporary directory, and creates a server
 * context over them and a client context that trusts that certificate.
 * Returns 0, or -1 with the reason in why.  Once, before any check; the
 * directory is removed by tls_check_fini. */
int tls_check_init(char *why, size_t why_size);

/* The certificate's and the key's files (PEM) tls_check_init wrote, for
 * other tests' contexts: valid until tls_check_fini. */
const char *tls_check_cert_file(void);
const char *tls_check_key_file(void);

/* The contexts released and the directory removed. */
void tls_check_fini(void);

/* Feeds data as the client's ciphertext into a new server session and as
 * the server's into a new client session, whole and then in pieces of a
 * size derived from data.  Returns 0 when every result is one the engine's
 * interface documents, no plaintext comes before the handshake is done and
 * none after a failure; otherwise -1 with the reason in why. */
int tls_check_input(const unsigned char *data, size_t n, char *why,
                    size_t why_size);

#endif
