package redisops

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestInt64s: an array reply's integers, as Cmd.Int64Slice reads them, into the caller's buffer.
func TestInt64s(t *testing.T) {
	reply := func(v any, err error) *redis.Cmd {
		cmd := redis.NewCmd(context.Background())
		cmd.SetVal(v)
		cmd.SetErr(err)
		return cmd
	}
	var buf [3]int64
	got, err := int64s(reply([]any{int64(1), "2", int64(-3)}, nil), buf[:0])
	if err != nil || !slices.Equal(got, []int64{1, 2, -3}) || &got[0] != &buf[0] {
		t.Fatalf("int64s = %v, %v; want [1 2 -3] in the buffer given", got, err)
	}
	failed := errors.New("down")
	if _, err := int64s(reply(nil, failed), nil); !errors.Is(err, failed) {
		t.Fatalf("a failed reply gave %v, want its error", err)
	}
	for _, v := range []any{int64(1), []any{"x"}, []any{1.5}} {
		if got, err := int64s(reply(v, nil), nil); err == nil {
			t.Fatalf("int64s(%v) = %v, want an error", v, got)
		}
	}
}

// TestLeaseArg: the boxed argument of the last lease is kept, and a new lease replaces it.
func TestLeaseArg(t *testing.T) {
	var o Ops
	a := o.leaseArg(30 * time.Second)
	if a != any(int64(30000)) || o.leaseArg(30*time.Second) != a {
		t.Fatalf("leaseArg(30s) = %v, want 30000, twice", a)
	}
	if n := testing.AllocsPerRun(100, func() { o.leaseArg(30 * time.Second) }); n != 0 {
		t.Fatalf("leaseArg of the last lease allocates %v times, want 0", n)
	}
	if b := o.leaseArg(1500 * time.Microsecond); b != any(int64(2)) {
		t.Fatalf("leaseArg(1.5ms) = %v, want 2 (rounded up)", b)
	}
}
