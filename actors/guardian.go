package actors

import (
	"github.com/asynkron/protoactor-go/actor"
)

// Guardian routes each [Routed] command to the actor of its lock name, spawning that actor when needed,
// and stops lock actors that report themselves idle. There is one guardian per coordinator. It never
// blocks, so it runs on the sender's goroutine (a synchronized dispatcher) and saves every command a
// goroutine hop.
type Guardian struct {
	env      *Env
	children map[string]*child
}

type child struct {
	pid    *actor.PID
	routed uint64
}

// NewGuardianProps returns the props of a guardian whose lock actors share env.
func NewGuardianProps(env *Env) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Guardian{env: env, children: make(map[string]*child)}
	}, actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)), Recover(env.Failures, "guardian", ""))
}

// Receive implements actor.Actor.
func (g *Guardian) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case Routed:
		name, fam := m.LockName(), m.LockKind().family()
		key := routeKey(fam, name)
		c := g.children[key]
		if c == nil {
			env := g.env
			opts := []actor.PropsOption{Recover(env.Failures, "lock actor", name)}
			if env.Dispatcher != nil {
				opts = append(opts, actor.WithDispatcher(env.Dispatcher))
			}
			pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return newLockActor(name, key, fam, env) }, opts...))
			c = &child{pid: pid}
			g.children[key] = c
		}
		c.routed++
		ctx.Send(c.pid, m)
	case *idle:
		// Stop the actor only if no command is on its way to it: every command it was sent, it has
		// received, and it was idle after the last one.
		if c := g.children[m.key]; c != nil && c.pid.Equal(m.pid) && c.routed == m.routed {
			delete(g.children, m.key)
			ctx.Stop(c.pid)
		}
	}
}

// routeKey names the actor of one family of locks on name: a plain, a fair and a read-write lock on
// the same name have an actor each.
func routeKey(f family, name string) string {
	return string([]byte{'0' + byte(f), ':'}) + name
}
