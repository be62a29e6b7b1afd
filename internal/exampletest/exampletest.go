// Package exampletest runs the programs under examples/ as tests, so that an example that stops
// working fails the suite instead of its first reader.
package exampletest

import (
	"os/exec"
	"testing"

	"github.com/lockwarden/lockwarden/internal/devredis"
)

// Run calls run, an example's whole program, once on each embedded Redis it can meet on a user's
// machine: redis-server when it is on PATH, and miniredis, which an example falls back to without it
// (PATH is emptied for that run). REDIS_ADDR is cleared, so that the examples start their own. The test
// fails with run's error.
func Run(t *testing.T, run func() error) {
	t.Helper()
	t.Setenv(devredis.EnvAddr, "")
	if _, err := exec.LookPath("redis-server"); err == nil {
		t.Run("redis-server", func(t *testing.T) {
			if err := run(); err != nil {
				t.Fatalf("example on redis-server: %v", err)
			}
		})
	} else {
		t.Log("redis-server is not on PATH: the example runs on miniredis only")
	}
	t.Run("miniredis", func(t *testing.T) {
		t.Setenv("PATH", "")
		if err := run(); err != nil {
			t.Fatalf("example on miniredis: %v", err)
		}
	})
}
