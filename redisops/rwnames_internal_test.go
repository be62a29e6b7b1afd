package redisops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestRWNamesReaders: a reader's keys are built once and kept, the cache starts over past
// maxCachedReaders, and a read acquire's and a sequenced read release's commands, whose keys are
// kept, allocate only their argument list (and the release its sequence number, boxed).
func TestRWNamesReaders(t *testing.T) {
	n := RWNamesOf("rw:names")
	r := n.reader("owner-1")
	if n.reader("owner-1") != r {
		t.Fatal("a reader's keys were built again")
	}
	if r.timeouts != any(readTimeoutPrefix("rw:names", "owner-1")) || r.writeField != any(WriteField("owner-1")) ||
		r.latch != any(UnlockLatchKey("rw:names", "owner-1")) {
		t.Fatalf("reader keys %+v are not those the scripts take", r)
	}
	for i := range maxCachedReaders {
		n.reader(fmt.Sprint("other-", i))
	}
	if len(n.readers) > maxCachedReaders {
		t.Fatalf("%d readers cached, want at most %d", len(n.readers), maxCachedReaders)
	}

	o := &Ops{latchArg: int64(30000), publishArg: "publish"}
	r2 := n.reader("owner-2")
	if a := testing.AllocsPerRun(100, func() { o.readAcquireCall(n, r2, 30*time.Second, 0) }); a != 1 {
		t.Fatalf("a read acquire call allocates %v times, want 1 (its command)", a)
	}
	if a := testing.AllocsPerRun(100, func() { o.readReleaseCall(n, r2, "req:r7", 1) }); a != 2 {
		t.Fatalf("a sequenced read release call allocates %v times, want 2 (its command and sequence)", a)
	}

	// The commands are the ones the unnamed calls made.
	c := o.readReleaseCall(n, r2, "req:r7", 1)
	keys, args := splitCommand(c.command)
	wantKeys := []string{"rw:names", RWChannelName("rw:names"), UnlockLatchKey("rw:names", "owner-2"),
		readTimeoutPrefix("rw:names", "owner-2")}
	wantArgs := []any{"owner-2", UnlockMessage, int64(30000), "publish", allReadersPrefix("rw:names"), "7"}
	if !slices.Equal(keys, wantKeys) || !slices.Equal(args, wantArgs) {
		t.Fatalf("read release command = %v %v, want %v %v", keys, args, wantKeys, wantArgs)
	}
	c = o.readReleaseCall(n, r2, "req-unsequenced", UnknownHoldCount)
	keys, args = splitCommand(c.command)
	if keys[2] != UnlockLatchKey("rw:names", "req-unsequenced") || args[5] != "" {
		t.Fatalf("unsequenced read release command = %v %v, want the request's latch and no sequence", keys, args)
	}
}

// TestRWNamesMadeOtherwise: names not made by RWNamesOf (nil, or a literal) are refused with
// ErrBadArgument before anything is sent, and names for a single call keep no reader's keys.
func TestRWNamesMadeOtherwise(t *testing.T) {
	o := &Ops{latchArg: int64(30000), publishArg: "publish"}
	for _, n := range []*RWNames{nil, {}} {
		if _, err := o.ReadAcquireNamed(context.Background(), n, "a", time.Second, 0); !errors.Is(err, ErrBadArgument) {
			t.Errorf("ReadAcquireNamed(%v) = %v, want ErrBadArgument", n, err)
		}
		if _, err := o.ReadReleaseNamed(context.Background(), n, "a", "req:r1", 1); !errors.Is(err, ErrBadArgument) {
			t.Errorf("ReadReleaseNamed(%v) = %v, want ErrBadArgument", n, err)
		}
		b := o.NewBatch()
		acq, rel := b.ReadAcquire(n, "a", time.Second, 0), b.ReadRelease(n, "a", "req:r1", 1)
		if b.Len() != 0 {
			t.Errorf("a batch took %d calls on names %v", b.Len(), n)
		}
		if _, err := acq(); !errors.Is(err, ErrBadArgument) {
			t.Errorf("Batch.ReadAcquire(%v) answered %v, want ErrBadArgument", n, err)
		}
		if _, err := rel(); !errors.Is(err, ErrBadArgument) {
			t.Errorf("Batch.ReadRelease(%v) answered %v, want ErrBadArgument", n, err)
		}
	}
	once := rwNamesOnce("rw:once")
	once.reader("a")
	if len(once.readers) != 0 {
		t.Errorf("names for one call kept %d readers", len(once.readers))
	}
	if n := RWNamesOf("rw:once"); n.Name() != "rw:once" || n.Channel() != RWChannelName("rw:once") {
		t.Errorf("RWNamesOf: Name %q, Channel %q", n.Name(), n.Channel())
	}
}
