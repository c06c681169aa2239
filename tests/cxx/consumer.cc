// SPDX-License-Identifier: Apache-2.0
// tests/cxx/consumer.cc - a C++ program using taxi's public headers: every
// header through taxi/taxi.h, the static initialisers, and a call into each
// family, so that the headers stay valid C++ (extern "C", no C-only syntax
// outside #ifndef __cplusplus) and warning-free under -Wall -Wextra.
#include <taxi/taxi.h>

#include <cstdio>
#include <cstring>

namespace {

int fail(const char *what, int rc) {
  std::fprintf(stderr, "consumer: %s: %s\n", what, taxi_strerror(rc));
  return 1;
}

void accepted(taxi_listener_t *, taxi_stream_t *stream, void *) {
  taxi_stream_close(stream);
}

}  // namespace

int main() {
  taxi_op_t op = TAXI_OP_INIT;
  taxi_io_options_t io_opts = TAXI_IO_OPTIONS_INIT;
  taxi_stream_options_t stream_opts = TAXI_STREAM_OPTIONS_INIT;
  taxi_listener_options_t listener_opts = TAXI_LISTENER_OPTIONS_INIT;
  taxi_reactor_options_t reactor_opts = TAXI_REACTOR_OPTIONS_INIT;
  taxi_proactor_options_t proactor_opts = TAXI_PROACTOR_OPTIONS_INIT;
  taxi_lf_options_t lf_opts = TAXI_LF_OPTIONS_INIT;
  taxi_hsha_options_t hsha_opts = TAXI_HSHA_OPTIONS_INIT;
  taxi_lf_sets_options_t sets_opts = TAXI_LF_SETS_OPTIONS_INIT;
  taxi_proactor_group_options_t group_opts = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
  taxi_lf_bound_options_t bound_opts = TAXI_LF_BOUND_OPTIONS_INIT;
  if (op.kind != TAXI_OP_NONE || io_opts.size != sizeof io_opts ||
      stream_opts.high_watermark == 0 ||
      listener_opts.size != sizeof listener_opts ||
      reactor_opts.size != sizeof reactor_opts ||
      proactor_opts.size != sizeof proactor_opts ||
      lf_opts.size != sizeof lf_opts || hsha_opts.size != sizeof hsha_opts ||
      sets_opts.size != sizeof sets_opts ||
      group_opts.size != sizeof group_opts ||
      bound_opts.size != sizeof bound_opts) {
    std::fprintf(stderr, "consumer: an initialiser is wrong\n");
    return 1;
  }

  taxi_reactor_t *reactor = nullptr;
  int rc = taxi_reactor_create(&reactor, &reactor_opts);
  if (rc < 0) return fail("taxi_reactor_create", rc);
  taxi_lf_pool_t *pool = nullptr;
  lf_opts.promotion = TAXI_PROMOTE_FIFO;
  rc = taxi_lf_create(&pool, reactor, &lf_opts);
  if (rc < 0) return fail("taxi_lf_create", rc);
  taxi_lf_destroy(pool);
  std::printf("taxi %s (%s) on %s\n", taxi_version_string(),
              std::strcmp(taxi_version_string(), TAXI_VERSION_STRING) == 0
                  ? "headers match"
                  : "headers differ",
              taxi_reactor_backend(reactor));
  rc = taxi_reactor_destroy(reactor);
  if (rc < 0) return fail("taxi_reactor_destroy", rc);

  taxi_proactor_t *proactor = nullptr;
  rc = taxi_proactor_create(&proactor, &proactor_opts);
  if (rc < 0) return fail("taxi_proactor_create", rc);
  std::printf("proactor on %s\n", taxi_proactor_backend(proactor));
  rc = taxi_proactor_destroy(proactor);
  if (rc < 0) return fail("taxi_proactor_destroy", rc);
  taxi_proactor_group_t *group = nullptr;
  group_opts.count = 2;
  group_opts.proactor = &proactor_opts;
  rc = taxi_proactor_group_create(&group, &group_opts);
  if (rc < 0) return fail("taxi_proactor_group_create", rc);
  rc = taxi_proactor_group_destroy(group);
  if (rc < 0) return fail("taxi_proactor_group_destroy", rc);
  (void)hsha_opts;
  (void)sets_opts;

  io_opts.dispatcher = TAXI_IO_PROACTOR;
  io_opts.threads = 1;
  taxi_io_t *io = nullptr;
  rc = taxi_io_create(&io, &io_opts);
  if (rc < 0) return fail("taxi_io_create", rc);
  taxi_listener_t *listener = nullptr;
  rc = taxi_listener_create(&listener, io, "127.0.0.1:0", &listener_opts,
                            accepted, nullptr);
  if (rc < 0) return fail("taxi_listener_create", rc);
  taxi_listener_close(listener);
  rc = taxi_io_destroy(io);
  if (rc < 0) return fail("taxi_io_destroy", rc);
  return 0;
}
