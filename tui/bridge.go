package tui

import (
	"context"
	"sync"

	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

// Messages the bridge delivers to the model, in the order the engine
// produced them.
type (
	// eventsMsg is a batch of consecutive engine events.
	eventsMsg []engine.Event
	// continueAsk is the engine asking whether to continue an installed
	// platform; the model answers on reply.
	continueAsk struct {
		q     engine.ContinueQuestion
		reply chan<- bool
	}
	// destroyAsk is the engine asking before destroy removes anything.
	destroyAsk struct {
		q     engine.DestroyQuestion
		reply chan<- bool
	}
	// opDoneMsg says the running operation returned; it is queued after
	// every event of the operation, so the model has seen the result.
	opDoneMsg struct{ err error }
)

// Bridge connects the engine to the program: it is the engine's Sink and
// Confirmer. Emit never blocks on the UI: events are queued and one
// forwarding goroutine hands them to the program with program.Send, in
// batches, so a burst of events costs one message per batch and nothing is
// ever dropped.
type Bridge struct {
	mu      sync.Mutex
	wake    chan struct{}
	queue   []tea.Msg
	stopped bool
	done    chan struct{}
}

// NewBridge returns a bridge; call Start once the program exists.
func NewBridge() *Bridge {
	return &Bridge{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Start runs the forwarding goroutine, which calls send (program.Send)
// until Stop.
func (b *Bridge) Start(send func(tea.Msg)) {
	go func() {
		defer close(b.done)
		for {
			b.mu.Lock()
			batch, stopped := b.queue, b.stopped
			b.queue = nil
			b.mu.Unlock()
			if len(batch) == 0 {
				if stopped {
					return
				}
				<-b.wake
				continue
			}
			forward(batch, send)
		}
	}()
}

// Events returns the batch's events (for tests outside tui that watch
// what a bridge forwards).
func (m eventsMsg) Events() []engine.Event { return m }

// forward sends msgs in order, joining runs of events into one message.
func forward(msgs []tea.Msg, send func(tea.Msg)) {
	var evs eventsMsg
	for _, m := range msgs {
		if ev, ok := m.(engine.Event); ok {
			evs = append(evs, ev)
			continue
		}
		if len(evs) > 0 {
			send(evs)
			evs = nil
		}
		send(m)
	}
	if len(evs) > 0 {
		send(evs)
	}
}

// Stop ends the forwarding goroutine once the queue is drained.
func (b *Bridge) Stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.signal()
	<-b.done
}

func (b *Bridge) push(m tea.Msg) {
	b.mu.Lock()
	b.queue = append(b.queue, m)
	b.mu.Unlock()
	b.signal()
}

func (b *Bridge) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Emit implements engine.Sink.
func (b *Bridge) Emit(ev engine.Event) { b.push(ev) }

// Done queues the end of an operation behind its events.
func (b *Bridge) Done(err error) { b.push(opDoneMsg{err: err}) }

// ConfirmContinue implements engine.Confirmer: the engine goroutine blocks
// until the user answers on the "already installed" screen.
func (b *Bridge) ConfirmContinue(ctx context.Context, q engine.ContinueQuestion) (bool, error) {
	return b.ask(ctx, func(reply chan<- bool) tea.Msg { return continueAsk{q: q, reply: reply} })
}

// ConfirmDestroy implements engine.Confirmer: the user must type the
// cluster name.
func (b *Bridge) ConfirmDestroy(ctx context.Context, q engine.DestroyQuestion) (bool, error) {
	return b.ask(ctx, func(reply chan<- bool) tea.Msg { return destroyAsk{q: q, reply: reply} })
}

// ask queues the question question(reply) behind the events before it and
// blocks the engine goroutine until the user answers or ctx ends.
func (b *Bridge) ask(ctx context.Context, question func(reply chan<- bool) tea.Msg) (bool, error) {
	reply := make(chan bool, 1)
	b.push(question(reply))
	return wait(ctx, reply)
}

func wait(ctx context.Context, reply <-chan bool) (bool, error) {
	select {
	case ok := <-reply:
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
