// Package e2e drives the real agentd binary as a subprocess, against the
// protocol fakes running in the test process: crash safety under SIGKILL,
// graceful shutdown on SIGTERM, (with AGENTD_LOAD=1) a long load run, and
// (TestReal*) the same binary against real llama-server and Ollama servers
// that .ci/run starts (testkit/realmodel); those skip where they are unset.
// It has no code of its own beyond this comment; the tests build the
// binary once per `go test` run. Figures are logged, and written to RESULTS.md beside this file when AGENTD_WRITE_RESULTS=1.
package e2e
