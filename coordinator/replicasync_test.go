package coordinator

import (
	"errors"
	"testing"
	"time"
)

func TestReplicaSyncOptions(t *testing.T) {
	tests := []struct {
		name         string
		opt          Option
		wantErr      error
		wantReplicas int
		wantTimeout  time.Duration
	}{
		{"default", func(*options) error { return nil }, nil, MajorityOfReplicas, time.Second},
		{"majority", WithReplicaSync(MajorityOfReplicas, 2*time.Second), nil, MajorityOfReplicas, 2 * time.Second},
		{"two replicas", WithReplicaSync(2, 500*time.Millisecond), nil, 2, 500 * time.Millisecond},
		{"zero replicas is off", WithReplicaSync(0, time.Second), nil, 0, time.Second},
		{"off", WithoutReplicaSync(), nil, 0, DefaultSyncTimeout},
		{"negative replicas", WithReplicaSync(-2, time.Second), ErrInvalidOption, 0, 0},
		{"zero timeout", WithReplicaSync(1, 0), ErrInvalidOption, 0, 0},
		{"negative timeout", WithReplicaSync(1, -time.Second), ErrInvalidOption, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := defaultOptions()
			err := tt.opt(&o)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if o.syncReplicas != tt.wantReplicas || o.syncTimeout != tt.wantTimeout {
				t.Errorf("got replicas %d, timeout %v; want %d, %v", o.syncReplicas, o.syncTimeout, tt.wantReplicas, tt.wantTimeout)
			}
		})
	}
}
