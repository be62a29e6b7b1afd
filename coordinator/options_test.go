package coordinator

import (
	"errors"
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
		{"stop release", WithStopReleaseTimeout(time.Second), nil, func(o options) bool { return o.stopReleaseTimeout == time.Second }},
		{"stop release zero", WithStopReleaseTimeout(0), ErrInvalidOption, nil},
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

func TestMutexOptionsRecordErrors(t *testing.T) {
	c := &Coordinator{id: "c"}
	tests := []struct {
		name string
		m    *Mutex
		want error
	}{
		{"empty name", c.Mutex(""), ErrEmptyName},
		{"empty owner", c.Mutex("n", WithOwner("")), ErrEmptyOwner},
		{"zero lease", c.Mutex("n", WithLease(0)), ErrInvalidLease},
		{"negative lease", c.Mutex("n", WithLease(-time.Second)), ErrInvalidLease},
		{"lease above MaxDuration", c.Mutex("n", WithLease(MaxDuration+1)), ErrInvalidLease},
		{"lease MaxInt64", c.Mutex("n", WithLease(math.MaxInt64)), ErrInvalidLease},
		{"lease MaxDuration", c.Mutex("n", WithOwner("o"), WithLease(MaxDuration)), nil},
		{"valid", c.Mutex("n", WithOwner("o"), WithLease(time.Second)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.m.err, tt.want) {
				t.Fatalf("handle error %v, want %v", tt.m.err, tt.want)
			}
		})
	}
	if m := c.Mutex("n"); !strings.HasPrefix(m.Owner(), "c:") {
		t.Fatalf("generated owner %q, want <coordinator id>:<n>", m.Owner())
	}
	a, b := c.Mutex("n"), c.Mutex("n")
	if a.Owner() == b.Owner() {
		t.Fatalf("two handles share owner %q; each handle must be its own owner", a.Owner())
	}
}
