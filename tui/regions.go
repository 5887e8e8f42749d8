package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

// regionState is one location's search on the home screen.
type regionState struct {
	provider, name string
	done           bool
	err            string
}

// progressBuf hands the search's progress to the program: the search's
// goroutines add (never block), a command takes them all on a kick.
type progressBuf struct {
	mu   sync.Mutex
	seen []engine.SearchProgress
	kick chan struct{}
}

func (b *progressBuf) add(p engine.SearchProgress) {
	b.mu.Lock()
	b.seen = append(b.seen, p)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (b *progressBuf) take() []engine.SearchProgress {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.seen
	b.seen = nil
	return out
}

type searchMsg struct {
	gen   int
	seen  []engine.SearchProgress
	buf   *progressBuf
	ctx   context.Context
	done  chan clustersMsg
	final *clustersMsg
}

// refreshWithProgress runs the discovery: progress arrives as searchMsgs
// until the result, which ends them.
func (m *Model) refreshWithProgress(o Ops) tea.Cmd {
	m.homeGen++
	m.regions = nil
	gen := m.homeGen
	buf := &progressBuf{kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan clustersMsg, 1)
	// The search runs as a command of its own (Update starts no
	// goroutine); its progress and result come through buf and done.
	search := func() tea.Msg {
		defer cancel()
		cs, err := o.Clusters(ctx, buf.add)
		done <- clustersMsg{clusters: cs, err: err}
		return nil
	}
	return tea.Batch(search, waitSearch(ctx, gen, buf, done))
}

func waitSearch(ctx context.Context, gen int, buf *progressBuf, done chan clustersMsg) tea.Cmd {
	return func() tea.Msg {
		select {
		case <-buf.kick:
			return searchMsg{gen: gen, seen: buf.take(), buf: buf, ctx: ctx, done: done}
		case res := <-done:
			return searchMsg{gen: gen, seen: buf.take(), final: &res}
		}
	}
}

// searchProgress applies progress; the result ends the search.
func (m *Model) searchProgress(msg searchMsg) tea.Cmd {
	if msg.gen != m.homeGen {
		return nil
	}
	for _, p := range msg.seen {
		i := -1
		for j, r := range m.regions {
			if r.provider == p.Provider && r.name == p.Location {
				i = j
			}
		}
		if i < 0 {
			m.regions = append(m.regions, regionState{provider: p.Provider, name: p.Location})
			i = len(m.regions) - 1
		}
		m.regions[i].done, m.regions[i].err = p.Done, p.Err
	}
	if msg.final != nil {
		m.update(*msg.final)
		return nil
	}
	return waitSearch(msg.ctx, msg.gen, msg.buf, msg.done)
}

// viewRegions shows the regions' search: a spinner per region under way,
// ✓ searched, ✗ failed; once every region ended, the failed ones with
// their causes (the screen itself never fails for them).
func (m *Model) viewRegions(p *page) {
	if len(m.regions) == 0 {
		return
	}
	ended := 0
	var parts []string
	var failed []regionState
	for _, r := range m.regions {
		switch {
		case !r.done:
			parts = append(parts, m.spinner()+" "+r.name)
		case r.err != "":
			ended++
			failed = append(failed, r)
			parts = append(parts, m.st.fail.Render("✗")+" "+r.name)
		default:
			ended++
			parts = append(parts, m.st.ok.Render("✓")+" "+r.name)
		}
	}
	p.blank()
	noun := strings.ToUpper(m.regions[0].provider) + " " + locationNoun(m.regions[0].provider) + "s"
	if ended < len(m.regions) || m.homeLoading {
		p.line(fmt.Sprintf("%s: %d of %d searched", noun, ended, len(m.regions)))
		p.line("  " + strings.Join(parts, "  "))
	} else {
		p.line(fmt.Sprintf("%s: %d searched, %d failed", noun, len(m.regions), len(failed)))
	}
	for _, r := range failed {
		p.hang(m.st.errorText.Render(fmt.Sprintf("  ✗ %s: %s", r.name, r.err)), 4)
	}
}
