package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		opt     Option
		wantErr error
		check   func(options) bool
	}{
		{"watchdog", WithWatchdogTimeout(time.Second), nil, func(o options) bool { return o.watchdogTimeout == time.Second }},
		{"watchdog zero", WithWatchdogTimeout(0), ErrInvalidOption, nil},
		{"watchdog negative", WithWatchdogTimeout(-time.Second), ErrInvalidOption, nil},
		{"idle", WithIdleTimeout(time.Minute), nil, func(o options) bool { return o.idleTimeout == time.Minute }},
		{"idle zero", WithIdleTimeout(0), ErrInvalidOption, nil},
		{"watchdog max", WithWatchdogTimeout(MaxDuration), nil, func(o options) bool { return o.watchdogTimeout == MaxDuration }},
		{"watchdog above max", WithWatchdogTimeout(MaxDuration + 1), ErrInvalidOption, nil},
		{"watchdog MaxInt64", WithWatchdogTimeout(math.MaxInt64), ErrInvalidOption, nil},
		{"idle above max", WithIdleTimeout(MaxDuration + 1), ErrInvalidOption, nil},
		{"fair window above max", WithFairWaitWindow(MaxDuration + 1), ErrInvalidOption, nil},
		{"replica sync timeout above max", WithReplicaSync(1, MaxDuration+1), ErrInvalidOption, nil},
		{"handoffs", WithMaxHandoffs(0), nil, func(o options) bool { return o.maxHandoffs == 0 }},
		{"handoffs negative", WithMaxHandoffs(-1), ErrInvalidOption, nil},
		{"early handoff window", WithEarlyHandoffWindow(time.Second), nil, func(o options) bool { return o.earlyHandoffWindow == time.Second }},
		{"early handoffs off", WithEarlyHandoffWindow(0), nil, func(o options) bool { return o.earlyHandoffWindow == 0 }},
		{"early handoff window negative", WithEarlyHandoffWindow(-1), ErrInvalidOption, nil},
		{"early handoff window above max", WithEarlyHandoffWindow(MaxDuration + 1), ErrInvalidOption, nil},
		{"stop release", WithStopReleaseTimeout(time.Second), nil, func(o options) bool { return o.stopReleaseTimeout == time.Second }},
		{"stop release zero", WithStopReleaseTimeout(0), ErrInvalidOption, nil},
		{"workers", WithWorkers(3), nil, func(o options) bool { return o.workers == 3 }},
		{"workers max", WithWorkers(MaxWorkers), nil, func(o options) bool { return o.workers == MaxWorkers }},
		{"workers zero", WithWorkers(0), ErrInvalidOption, nil},
		{"workers negative", WithWorkers(-1), ErrInvalidOption, nil},
		{"workers above max", WithWorkers(MaxWorkers + 1), ErrInvalidOption, nil},
		{"nil logger is silent", WithLogger(nil), nil, func(o options) bool { return o.logger != nil }},
		{"logger", WithLogger(slog.Default()), nil, func(o options) bool { return o.logger == slog.Default() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := defaultOptions()
			err := tt.opt(&o)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil && !tt.check(o) {
				t.Fatalf("option not applied: %+v", o)
			}
		})
	}
}

func TestDefaultOptions(t *testing.T) {
	o := defaultOptions()
	if o.watchdogTimeout != 30*time.Second {
		t.Errorf("default watchdog timeout %v, want 30s (Redisson's)", o.watchdogTimeout)
	}
	if o.logger == nil || o.logger.Enabled(t.Context(), slog.LevelError) {
		t.Error("default logger is not silent")
	}
}

// optionCase is one option applied to the settings of type T: it must return an error matching
// want, or apply what check looks for.
type optionCase[T any] struct {
	name  string
	opt   func(*T) error
	want  error
	check func(T) bool
}

func runOptionCases[T any](t *testing.T, start func() T, cases []optionCase[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			o := start()
			err := tt.opt(&o)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got error %v, want %v", err, tt.want)
			}
			if tt.check != nil && !tt.check(o) {
				t.Fatalf("option not applied: %+v", o)
			}
		})
	}
}

func TestMutexOptions(t *testing.T) {
	start := func() mutexOptions { return mutexOptions{owner: "generated"} }
	runOptionCases(t, start, []optionCase[mutexOptions]{
		{"owner", WithOwner("o"), nil, func(o mutexOptions) bool { return o.owner == "o" && o.shared }},
		{"empty owner", WithOwner(""), ErrEmptyOwner, func(o mutexOptions) bool { return o.owner == "generated" && !o.shared }},
		{"lease", WithLease(time.Second), nil, func(o mutexOptions) bool { return o.lease == time.Second }},
		{"lease MinLease", WithLease(MinLease), nil, func(o mutexOptions) bool { return o.lease == MinLease }},
		{"lease MaxDuration", WithLease(MaxDuration), nil, func(o mutexOptions) bool { return o.lease == MaxDuration }},
		{"zero lease", WithLease(0), ErrInvalidLease, func(o mutexOptions) bool { return o.lease == 0 }},
		{"lease below MinLease", WithLease(MinLease - 1), ErrInvalidLease, nil},
		{"negative lease", WithLease(-time.Second), ErrInvalidLease, nil},
		{"lease above MaxDuration", WithLease(MaxDuration + 1), ErrInvalidLease, nil},
		{"lease MaxInt64", WithLease(math.MaxInt64), ErrInvalidLease, nil},
	})
}

func TestGroupOptions(t *testing.T) {
	start := func() groupOptions { return groupOptions{} }
	runOptionCases(t, start, []optionCase[groupOptions]{
		{"node timeout", WithNodeTimeout(time.Second), nil, func(o groupOptions) bool { return o.nodeTimeout == time.Second }},
		{"node timeout MaxDuration", WithNodeTimeout(MaxDuration), nil, func(o groupOptions) bool { return o.nodeTimeout == MaxDuration }},
		{"zero node timeout", WithNodeTimeout(0), ErrInvalidOption, func(o groupOptions) bool { return o.nodeTimeout == 0 }},
		{"negative node timeout", WithNodeTimeout(-time.Second), ErrInvalidOption, nil},
		{"node timeout above MaxDuration", WithNodeTimeout(MaxDuration + 1), ErrInvalidOption, nil},
		{"max lease", WithMaxLease(time.Minute), nil, func(o groupOptions) bool { return o.maxLease == time.Minute }},
		{"zero max lease", WithMaxLease(0), ErrInvalidOption, func(o groupOptions) bool { return o.maxLease == 0 }},
		{"max lease MaxInt64", WithMaxLease(math.MaxInt64), ErrInvalidOption, nil},
	})
}

func TestTryOptions(t *testing.T) {
	start := func() tryOptions { return tryOptions{lease: time.Hour} }
	runOptionCases(t, start, []optionCase[tryOptions]{
		{"wait", Wait(time.Second), nil, func(o tryOptions) bool { return o.wait == time.Second && o.waitSet && o.lease == time.Hour }},
		{"wait MaxDuration", Wait(MaxDuration), nil, func(o tryOptions) bool { return o.wait == MaxDuration }},
		{"zero wait", Wait(0), ErrInvalidWait, func(o tryOptions) bool { return !o.waitSet }},
		{"negative wait", Wait(-time.Second), ErrInvalidWait, nil},
		{"wait MaxInt64", Wait(math.MaxInt64), ErrInvalidWait, nil},
		{"lease", Lease(time.Second), nil, func(o tryOptions) bool { return o.lease == time.Second && !o.waitSet }},
		{"zero lease", Lease(0), ErrInvalidLease, func(o tryOptions) bool { return o.lease == time.Hour }},
		{"lease below MinLease", Lease(MinLease - 1), ErrInvalidLease, nil},
		{"lease above MaxDuration", Lease(MaxDuration + 1), ErrInvalidLease, nil},
	})
}

// closedCoordinator is a coordinator that is closed already: a valid handle's calls return ErrClosed
// without I/O, so that only the handle's own error can make them return anything else.
func closedCoordinator() *Coordinator {
	c := &Coordinator{id: "c", closed: make(chan struct{})}
	close(c.closed)
	return c
}

// TestHandleErr: a handle made with an empty name or an invalid option reports the error through Err
// right after it is made, the first invalid option's error when there are several, and every call on
// it returns that same error, before anything else (a closed coordinator, an ended ctx).
func TestHandleErr(t *testing.T) {
	c := closedCoordinator()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	type handle interface {
		Err() error
		Lock(context.Context) error
		TryLock(context.Context, ...TryOption) (bool, error)
		Unlock(context.Context) error
	}
	tests := []struct {
		name string
		h    handle
		want error
		// wantText is in the error when two options of one sentinel are invalid: the first one's.
		wantText string
	}{
		{"Mutex empty name", c.Mutex(""), ErrEmptyName, ""},
		{"Mutex empty name and a valid lease", c.Mutex("", WithLease(time.Second)), ErrEmptyName, ""},
		{"Mutex empty name and an invalid lease", c.Mutex("", WithLease(0)), ErrEmptyName, ""},
		{"Mutex empty owner", c.Mutex("n", WithOwner("")), ErrEmptyOwner, ""},
		{"Mutex zero lease", c.Mutex("n", WithLease(0)), ErrInvalidLease, ""},
		{"Mutex negative lease", c.Mutex("n", WithLease(-time.Second)), ErrInvalidLease, ""},
		{"Mutex lease above MaxDuration", c.Mutex("n", WithLease(MaxDuration+1)), ErrInvalidLease, ""},
		{"Mutex lease MaxInt64", c.Mutex("n", WithLease(math.MaxInt64)), ErrInvalidLease, ""},
		{"Mutex first of two: lease", c.Mutex("n", WithLease(0), WithOwner("")), ErrInvalidLease, ""},
		{"Mutex first of two: owner", c.Mutex("n", WithOwner(""), WithLease(0)), ErrEmptyOwner, ""},
		{"Mutex valid options", c.Mutex("n", nil, WithOwner("o"), WithLease(MaxDuration)), ErrClosed, ""},
		{"FairMutex empty name", c.FairMutex(""), ErrEmptyName, ""},
		{"FairMutex empty owner", c.FairMutex("n", WithOwner("")), ErrEmptyOwner, ""},
		{"FairMutex zero lease", c.FairMutex("n", WithLease(0)), ErrInvalidLease, ""},
		{"FairMutex valid options", c.FairMutex("n", WithOwner("o"), WithLease(time.Second)), ErrClosed, ""},
		{"RWMutex empty name", c.RWMutex(""), ErrEmptyName, ""},
		{"RWMutex empty owner", c.RWMutex("n", WithOwner("")), ErrEmptyOwner, ""},
		{"RWMutex zero lease", c.RWMutex("n", WithLease(0)), ErrInvalidLease, ""},
		{"RWMutex valid options", c.RWMutex("n", WithOwner("o"), WithLease(time.Second)), ErrClosed, ""},
		{"RWMutex read side", c.RWMutex("n", WithLease(-1)).Read(), ErrInvalidLease, ""},
		{"RWMutex write side", c.RWMutex("n", WithLease(-1)).Write(), ErrInvalidLease, ""},
		{"MultiLock no members", c.MultiLock(nil), ErrInvalidGroup, ""},
		{"MultiLock nil member", c.MultiLock([]*Mutex{c.Mutex("a"), nil}), ErrInvalidGroup, ""},
		{"MultiLock member twice", func() handle { m := c.Mutex("a"); return c.MultiLock([]*Mutex{m, m}) }(), ErrInvalidGroup, ""},
		{"MultiLock invalid member", c.MultiLock([]*Mutex{c.Mutex("a"), c.Mutex("b", WithLease(0))}), ErrInvalidLease, ""},
		{"MultiLock zero node timeout", c.MultiLock([]*Mutex{c.Mutex("a")}, WithNodeTimeout(0)), ErrInvalidOption, "node timeout"},
		{"MultiLock option before members", c.MultiLock(nil, WithNodeTimeout(-1)), ErrInvalidOption, "node timeout"},
		{"MultiLock valid options", c.MultiLock([]*Mutex{c.Mutex("a")}, nil, WithNodeTimeout(time.Second)), ErrClosed, ""},
		{"RedLock nil member", c.RedLock([]*Mutex{nil}), ErrInvalidGroup, ""},
		{"RedLock negative node timeout", c.RedLock([]*Mutex{c.Mutex("a")}, WithNodeTimeout(-time.Second)), ErrInvalidOption, "node timeout"},
		{"RedLock zero max lease", c.RedLock([]*Mutex{c.Mutex("a")}, WithMaxLease(0)), ErrInvalidOption, "max lease"},
		{"RedLock first of two: max lease", c.RedLock([]*Mutex{c.Mutex("a")}, WithMaxLease(0), WithNodeTimeout(0)), ErrInvalidOption, "max lease"},
		{"RedLock first of two: node timeout", c.RedLock([]*Mutex{c.Mutex("a")}, WithNodeTimeout(0), WithMaxLease(0)), ErrInvalidOption, "node timeout"},
		{"RedLock valid options", c.RedLock([]*Mutex{c.Mutex("a")}, WithNodeTimeout(time.Second), WithMaxLease(time.Minute)), ErrClosed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Err()
			if tt.want == ErrClosed {
				// A valid handle: no construction error (a group of a closed coordinator has
				// ErrClosed as its construction error; it could never be used).
				if _, group := tt.h.(*Group); (group && !errors.Is(err, ErrClosed)) || (!group && err != nil) {
					t.Fatalf("Err() = %v, want nil for a handle, ErrClosed for a group", err)
				}
			} else if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.wantText) {
				t.Fatalf("Err() = %v, want %v (%q)", err, tt.want, tt.wantText)
			}
			calls := map[string]error{
				"Lock":   tt.h.Lock(t.Context()),
				"Unlock": tt.h.Unlock(t.Context()),
				// An ended ctx does not hide the handle's error.
				"Lock with an ended ctx": tt.h.Lock(ctx),
			}
			ok, err := tt.h.TryLock(t.Context())
			calls["TryLock"] = err
			if ok {
				t.Fatal("TryLock = true")
			}
			for call, got := range calls {
				if !errors.Is(got, tt.want) {
					t.Errorf("%s = %v, want %v", call, got, tt.want)
				}
				if want := tt.h.Err(); want != nil && got != want {
					t.Errorf("%s = %v, want the construction error itself (%v)", call, got, want)
				}
			}
		})
	}
	if m := c.Mutex("n", WithOwner("")); m.Owner() == "" {
		t.Errorf("a refused WithOwner(\"\") set the owner to %q", m.Owner())
	}
	if rw := c.RWMutex("n"); rw.Read().Owner() != rw.Write().Owner() || rw.Err() != nil {
		t.Errorf("RWMutex sides: owners %q and %q, Err %v; want one owner, nil", rw.Read().Owner(), rw.Write().Owner(), rw.Err())
	}
	if m := c.Mutex("n"); !strings.HasPrefix(m.Owner(), "c:") {
		t.Fatalf("generated owner %q, want <coordinator id>:<n>", m.Owner())
	}
	a, b := c.Mutex("n"), c.Mutex("n")
	if a.Owner() == b.Owner() {
		t.Fatalf("two handles share owner %q; each handle must be its own owner", a.Owner())
	}
}

// TestTryLockOptionErrors: TryLock reports the first invalid option of its call before anything
// else: before the handle's own error, a closed coordinator or an ended ctx.
func TestTryLockOptionErrors(t *testing.T) {
	c := closedCoordinator()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rw := c.RWMutex("rw")
	tries := map[string]func(context.Context, ...TryOption) (bool, error){
		"Mutex":             c.Mutex("n").TryLock,
		"FairMutex":         c.FairMutex("n").TryLock,
		"invalid Mutex":     c.Mutex("n", WithLease(0)).TryLock,
		"RWMutex.TryRLock":  rw.TryRLock,
		"RWMutex.TryLock":   rw.TryLock,
		"MultiLock":         c.MultiLock([]*Mutex{c.Mutex("a")}).TryLock,
		"invalid MultiLock": c.MultiLock(nil).TryLock,
	}
	for name, try := range tries {
		for _, tc := range []struct {
			name string
			opts []TryOption
			want error
		}{
			{"Wait(0)", []TryOption{Wait(0)}, ErrInvalidWait},
			{"Lease(-1)", []TryOption{Lease(-1)}, ErrInvalidLease},
			{"nil, Wait(-1s)", []TryOption{nil, Wait(-time.Second)}, ErrInvalidWait},
			{"Wait(1s), Lease(-1)", []TryOption{Wait(time.Second), Lease(-1)}, ErrInvalidLease},
			{"first of two: Lease", []TryOption{Lease(-1), Wait(0)}, ErrInvalidLease},
			{"first of two: Wait", []TryOption{Wait(0), Lease(-1)}, ErrInvalidWait},
		} {
			for _, ctx := range []context.Context{t.Context(), ctx} {
				if ok, err := try(ctx, tc.opts...); ok || !errors.Is(err, tc.want) {
					t.Errorf("%s TryLock(%s) = %v, %v; want false, %v", name, tc.name, ok, err, tc.want)
				}
			}
		}
	}
}
