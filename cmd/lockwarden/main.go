// Command lockwarden shows operators who holds which lock, semaphore or latch in Redis, and what
// happens to them, for lockwarden's locks and for every client of Redisson's layout (Redisson itself
// included).
//
// Usage:
//
//	lockwarden [flags] inspect NAME...      who holds NAME, since when, and who waits
//	lockwarden [flags] list [PATTERN]       the names matching PATTERN (default *), one line each
//	lockwarden [flags] processes            the lockwarden processes registered in Redis
//	lockwarden [flags] watch                follow the event journal stream live
//	lockwarden [flags] force-unlock NAME    free a lock whoever holds it (asks first unless --yes)
//
// Install it with
//
//	go install github.com/lockwarden/lockwarden/cmd/lockwarden@latest
//
// or run it at once with go run github.com/lockwarden/lockwarden/cmd/lockwarden@latest.
//
// Connection flags (they may come before or after the command): --addr (host:port, or several
// comma-separated with --cluster; default $REDIS_ADDR, else localhost:6379), --cluster, --sentinel
// (comma-separated sentinel addresses) with --master, --user and --password (or $REDIS_PASSWORD),
// --sentinel-user and --sentinel-password, --db, --tls, --tls-ca, --tls-cert, --tls-key,
// --tls-server-name, --tls-insecure, --timeout. Output is for people by default; --json writes JSON
// (one document, or one object per line for watch).
//
// Exit status: 0 on success, 1 when the command failed (Redis unreachable, a name that is not a lock
// for force-unlock, a refused confirmation), 2 for bad usage. Errors are one line on standard error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// quietLogger drops go-redis' own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	// go-redis logs failed dials on its own; the one error line the command writes says it all.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
