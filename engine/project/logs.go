package project

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kilnctl/kiln/engine/event"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// LogOptions choose which of a project's pod logs to read.
type LogOptions struct {
	// Follow streams new lines and picks up pods that start later, until
	// ctx ends.
	Follow bool
	// Tail is how many lines of each container to start with; <0 means all.
	Tail int64
	// Previous reads the previous (terminated) instance of each container.
	Previous bool
	// LimitBytes bounds each container's log (0: no bound).
	LimitBytes int64
}

// LogLine is one line of a project's pod log.
type LogLine struct {
	Pod       string
	Container string
	Line      string
}

// Logs writes the log lines of every container of every pod of project r to
// out, one container after the other (by pod name); with Follow, all
// containers at once, and pods that start later as they start, until ctx
// ends (which is not an error). out is called from one goroutine at a time.
func (o *Ops) Logs(ctx context.Context, r Ref, opts LogOptions, out func(LogLine)) error {
	if _, err := o.precheck(ctx, r, true); err != nil {
		return err
	}
	pods := o.Client.CoreV1().Pods(r.Namespace())
	sel := metav1.ListOptions{LabelSelector: o.selector(r.Project)}
	list, err := pods.List(ctx, sel)
	if err != nil {
		return fmt.Errorf("list pods of project %s: %w", r, err)
	}
	var mu sync.Mutex
	emit := func(l LogLine) {
		mu.Lock()
		defer mu.Unlock()
		out(l)
	}
	if !opts.Follow {
		items := list.Items
		sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
		lines := 0
		counted := func(l LogLine) { lines++; emit(l) }
		var looked []string
		for i := range items {
			for _, c := range containersOf(&items[i]) {
				if !logsReadable(&items[i], c, opts.Previous) {
					looked = append(looked, fmt.Sprintf("%s/%s (%s)", items[i].Name, c, notReadableWhy(opts.Previous)))
					continue
				}
				looked = append(looked, items[i].Name+"/"+c)
				if err := o.stream(ctx, r, items[i].Name, c, opts, counted); err != nil {
					return err
				}
			}
		}
		if lines == 0 {
			o.R.Logf(event.LevelWarn, "%s", noLinesMessage(r, looked, opts.Previous))
		}
		return nil
	}

	// Follow: one stream per running container, started once; the watch
	// from the list's resourceVersion brings pods that start later.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := map[string]bool{}
	consider := func(p *corev1.Pod) {
		for _, c := range containersOf(p) {
			k := p.Name + "/" + c
			if started[k] || !logsReadable(p, c, opts.Previous) {
				continue
			}
			started[k] = true
			name := p.Name
			wg.Go(func() {
				if err := o.stream(ctx, r, name, c, opts, emit); err != nil && ctx.Err() == nil {
					emit(LogLine{Pod: name, Container: c, Line: fmt.Sprintf("(log stream ended: %v)", err)})
				}
			})
		}
	}
	for i := range list.Items {
		consider(&list.Items[i])
	}
	rv := list.ResourceVersion
	for ctx.Err() == nil {
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("watch pods of project %s: %w", r, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = "" // too old: start again from the current state
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				consider(p)
			}
		}
		w.Stop()
	}
	return nil
}

func containersOf(p *corev1.Pod) []string {
	out := make([]string, 0, len(p.Spec.Containers))
	for _, c := range p.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// logsReadable reports whether container c of p has a log to read: it
// started (running or terminated), or, for previous, it restarted.
func logsReadable(p *corev1.Pod, c string, previous bool) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != c {
			continue
		}
		if previous {
			return cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil
		}
		return cs.State.Running != nil || cs.State.Terminated != nil
	}
	return false
}

func (o *Ops) stream(ctx context.Context, r Ref, pod, container string, opts LogOptions, emit func(LogLine)) error {
	lo := &corev1.PodLogOptions{Container: container, Follow: opts.Follow, Previous: opts.Previous}
	if opts.Tail >= 0 {
		lo.TailLines = &opts.Tail
	}
	if opts.LimitBytes > 0 {
		lo.LimitBytes = &opts.LimitBytes
	}
	rc, err := o.Client.CoreV1().Pods(r.Namespace()).GetLogs(pod, lo).Stream(ctx)
	if err != nil {
		return fmt.Errorf("read log of pod %s/%s container %s: %w", r.Namespace(), pod, container, err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		emit(LogLine{Pod: pod, Container: container, Line: sc.Text()})
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("read log of pod %s/%s container %s: %w", r.Namespace(), pod, container, err)
	}
	return nil
}

// noLinesMessage says that project r's pods had no log lines, naming the
// containers looked at (POD/CONTAINER, with why one could not be read).
func noLinesMessage(r Ref, looked []string, previous bool) string {
	what := "no log lines"
	if previous {
		what = "no log lines of a previous container instance"
	}
	if len(looked) == 0 {
		return fmt.Sprintf("%s: project %s has no pods (suspended, or not started: kiln project inspect shows its state)", what, r)
	}
	return fmt.Sprintf("%s in project %s; looked at %s", what, r, strings.Join(looked, ", "))
}

// notReadableWhy says why logsReadable refused a container.
func notReadableWhy(previous bool) string {
	if previous {
		return "no previous instance"
	}
	return "not started yet"
}
