package actors

import (
	"github.com/asynkron/protoactor-go/actor"
)

// MaxPooledActors bounds the lock actors that a guardian keeps, unbound, for reuse: an actor whose name
// went idle is recycled into the pool and bound to the next new name, rather than stopped and another
// spawned; past this many, it is stopped. With the idle timeout, which unbinds an actor once its name
// has had no holders and no waiters for that long, it bounds the memory of a coordinator that sees
// millions of distinct names over time.
const MaxPooledActors = 1024

// Guardian binds an actor to each lock name (a pooled one, or a new one) and recycles the lock actors
// that report themselves idle. It tells a handle which actor serves its name ([Locate]), and the
// handle sends its commands there itself, on the [Route] it keeps; it routes the [Routed] commands
// sent to it (abandonments, the message API's, a group's) to the actor of their name. There is one
// guardian per coordinator. It never blocks, so it runs on the sender's goroutine (a synchronized
// dispatcher) and saves every message a goroutine hop.
//
// It owns the coordinator's timer service ([Timers]), which its lock actors share; the service stops
// once the guardian and every lock actor have stopped.
type Guardian struct {
	env      *Env
	timers   *Timers
	children map[string]*child
	// pool holds recycled actors bound to no name, at most MaxPooledActors.
	pool []*actor.PID
	// bindings counts the bindings of actors to names; each binding has its number, so that an idle
	// report of an earlier binding of the same actor to the same name is not taken for the current.
	bindings uint64
	// stopping is set once the guardian has begun to stop (the coordinator closes): it binds no actor
	// any more, and answers the commands that still reach it as closed.
	stopping bool
}

type child struct {
	// route holds the actor's PID and counts the commands sent to it, by the guardian and by the
	// handles that send their own (see Route).
	route   Route
	binding uint64
	// primitive marks a primitive actor: stopped when idle, never pooled.
	primitive bool
}

// bind gives a pooled lock actor its new name; the guardian sends it before the first command for the
// name, so the actor has its name before it sees any.
type bind struct {
	name, key string
	family    family
	binding   uint64
}

// recycle tells a lock actor that it is bound to no name any more: it drops what it kept of the old one.
type recycle struct{}

// NewGuardianProps returns the props of a guardian whose lock actors share env.
func NewGuardianProps(env *Env) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &recovering{actor: &Guardian{env: env, children: make(map[string]*child)}, f: env.Failures, name: "guardian"}
	}, actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)),
		// Every message of the guardian may run on the posting goroutine: it routes and spawns, and
		// never waits. Its synchronized dispatcher runs it there anyway; the inline mailbox does so
		// without protoactor's default mailbox's allocation for each message it schedules.
		actor.WithMailbox(newInlineMailbox(func(any) bool { return true })))
}

// Receive implements actor.Actor.
func (g *Guardian) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root := ctx.ActorSystem().Root
		g.timers = NewTimers(func(pid *actor.PID, msg any) { root.Send(pid, msg) })
	case *actor.Stopping:
		// The lock actors stop with the guardian, which waits for them, and takes messages
		// meanwhile. A command that comes now (its caller checked that the coordinator was open just
		// before Close) must not bind an actor to a new name: that actor would serve it after Close,
		// and the guardian, waiting for it too, would never stop.
		g.stopping = true
	case *actor.Stopped:
		// Every lock actor has stopped: nothing uses the timers any more.
		g.timers.Stop()
	case *Locate:
		if g.stopping {
			answerClosed(m.Cmd) // its caller waits on the command's ticket too
			return
		}
		// The caller sends the command itself, outside the guardian's turn: counted as sent, so
		// that the actor is not recycled before it has it.
		c := g.child(ctx, m.Cmd)
		c.route.count()
		m.route = &c.route
		close(m.done)
	case Routed:
		if g.stopping {
			answerClosed(m)
			return
		}
		c := g.child(ctx, m)
		c.route.count()
		ctx.Send(c.route.pid, m)
	case *idle:
		// Recycle the actor only if no command is on its way to it: every command it was sent for
		// this name, by the guardian or by a handle, it has received, and it was idle after the last
		// one. Retiring the route stops the handles from sending any more.
		if c := g.children[m.key]; c != nil && c.route.pid.Equal(m.pid) && c.binding == m.binding && c.route.retire(m.routed) {
			delete(g.children, m.key)
			if !c.primitive && len(g.pool) < MaxPooledActors {
				ctx.Send(c.route.pid, recycle{})
				g.pool = append(g.pool, c.route.pid)
			} else {
				ctx.Stop(c.route.pid)
			}
		}
	}
}

// child returns the actor of m's name and kind, binding or spawning one when there is none.
func (g *Guardian) child(ctx actor.Context, m Routed) *child {
	name, fam := m.LockName(), familyOf(m.LockKind())
	key := m.routeKey()
	c := g.children[key]
	if c == nil {
		g.bindings++
		if families[fam].primitive {
			c = &child{binding: g.bindings, primitive: true}
			c.route.pid = g.spawnPrimitive(ctx, name, key, m.LockKind(), g.bindings)
		} else {
			c = &child{binding: g.bindings}
			c.route.pid = g.bind(ctx, name, key, fam, g.bindings)
		}
		g.children[key] = c
	}
	return c
}

// Locate asks the guardian for the actor of Cmd's name and kind, which the caller then sends Cmd to
// itself (see NewLocate), and keeps (Route) for its next commands. It is answered by Located. So the
// actor runs the command outside the guardian's turn, on the caller's goroutine when it may (an actor
// that the guardian posted to inline would hold up the routing of every command while it runs; a
// primitive's, while it waits on Redis).
type Locate struct {
	// Cmd is the command whose actor is asked for; the guardian does not send it, but counts it as
	// sent (the caller must send it).
	Cmd   Routed
	route *Route
	done  chan struct{}
}

// NewLocate returns a Locate for cmd. Should the guardian fail on it (a recovered panic), it answers
// cmd's ticket with the failure rather than the Locate, and so it does, with ReasonClosed, once it has
// begun to stop: its caller waits on both.
func NewLocate(cmd Routed) *Locate { return &Locate{Cmd: cmd, done: make(chan struct{})} }

// Located returns a channel closed once the guardian has answered, and then the actor's PID.
func (l *Locate) Located() <-chan struct{} { return l.done }

// PID returns the actor's PID once Located is closed.
func (l *Locate) PID() *actor.PID { return l.route.pid }

// Route returns the actor's route once Located is closed, for the caller's next commands.
func (l *Locate) Route() *Route { return l.route }

// bind returns an actor for the name: a pooled one, told its new name, or a new one.
func (g *Guardian) bind(ctx actor.Context, name, key string, fam family, binding uint64) *actor.PID {
	if n := len(g.pool); n > 0 {
		pid := g.pool[n-1]
		g.pool[n-1] = nil
		g.pool = g.pool[:n-1]
		ctx.Send(pid, &bind{name: name, key: key, family: fam, binding: binding})
		return pid
	}
	env, timers := g.env, g.timers
	var opts []actor.PropsOption
	if env.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(env.Dispatcher))
	}
	a := newLockActor(name, key, fam, env)
	a.timers, a.binding = timers, binding
	opts = append(opts, actor.WithMailbox(newInlineMailbox(a.inlineSafe)))
	return ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &recovering{actor: a, f: env.Failures, name: "lock actor", lock: name}
	}, opts...))
}

// spawnPrimitive spawns the actor of a semaphore, permit semaphore or count-down latch name. Its Redis
// calls wait in turn, so it runs on the coordinator's dispatcher, except for the commands that their
// callers send it themselves (see Locate) and wait for on their own goroutine (see
// primitiveActor.inlineSafe): never inside the guardian's turn.
func (g *Guardian) spawnPrimitive(ctx actor.Context, name, key string, k Kind, binding uint64) *actor.PID {
	env := g.env
	var opts []actor.PropsOption
	if env.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(env.Dispatcher))
	}
	a := newPrimitiveActor(name, key, k, env, binding)
	opts = append(opts, actor.WithMailbox(newInlineMailbox(a.inlineSafe)))
	return ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &recovering{actor: a, f: env.Failures, name: k.String() + " actor", lock: name}
	}, opts...))
}

// routeKey names the actor of one family of locks on name: a plain, a fair and a read-write lock on
// the same name have an actor each.
func routeKey(f family, name string) string {
	return string([]byte{'0' + byte(f), ':'}) + name
}
