package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// OverheadResult is agentd's per-turn overhead on a chat with many stored
// messages, against a zero-latency fake.
type OverheadResult struct {
	StoredMessages int `json:"stored_messages"`
	Window         int `json:"window"`
	Turns          int `json:"turns"`
	MessageBytes   int `json:"message_bytes,omitempty"`
	// FirstTurnMS is the turn that wakes the chat and folds the backlog;
	// the turns measured start once the learning of that fold is done.
	FirstTurnMS float64 `json:"first_turn_ms"`
	// TurnMS is POST-to-turn.completed, in process (hub.Submit to the
	// event); OverheadMS is that less the time inside model calls (request
	// sent to last byte read), i.e. all agentd does besides waiting.
	TurnMS     Quantiles `json:"turn_ms"`
	OverheadMS Quantiles `json:"overhead_ms"`
	// CPUMS is the process's CPU time (user and system) from one turn's
	// submit to the next's: everything agentd spends per turn, background
	// folds and learning included. FakeApart says the fake ran in a process
	// of its own, so none of its CPU is in these figures.
	CPUMS     Quantiles `json:"cpu_ms"`
	FakeApart bool      `json:"fake_apart"`
	// Plain and fold turns apart: a fold turn is one during which a fold
	// was applied (the summariser's work ran beside it, or it waited).
	PlainOverheadMS Quantiles `json:"plain_overhead_ms"`
	FoldOverheadMS  Quantiles `json:"fold_overhead_ms"`
	PlainCPUMS      Quantiles `json:"plain_cpu_ms"`
	FoldCPUMS       Quantiles `json:"fold_cpu_ms"`
	// FsyncMS is one synced 4 KB write on the store's disk, measured before
	// and after the turns (what `dd bs=4k count=200 oflag=dsync` measures).
	FsyncMS [2]float64 `json:"fsync_ms"`
	// StoreDurableMS is the store's durable batches during the turns
	// measured (each a commit and its sync; a turn waits on two), from the
	// daemon's agentd_store_durable_seconds (durableBetween).
	StoreDurableMS Quantiles `json:"store_durable_ms"`
	// PacedSyncMS is the disk alone at a turn's pace, after the turns
	// (pacedSyncMS): what a durable write's tail is bounded by.
	PacedSyncMS Quantiles `json:"paced_sync_ms"`
}

// overheadAnswer is what the overhead and scale parts' fake answers every
// turn.
const overheadAnswer = "Noted; here is a short answer to that."

// newOverheadFake keeps nothing of what it serves (neither part reads it):
// in this process, the heap measured is then agentd's.
func newOverheadFake(window int) *openaifake.Server {
	return openaifake.New(openaifake.Options{Window: window, Forget: true, Script: func(r testkit.Received) testkit.Reply {
		return testkit.Reply{Text: overheadAnswer, ChunkRunes: 64}
	}})
}

// fakeMemoryLimit is when the fake's process collects garbage: only then.
// The fake keeps nothing (Forget), so what it holds live is the requests
// in flight; collecting at the runtime's default pace (each time the heap
// doubles from a few MB) ran a cycle every few requests, and its idle mark
// workers took the core agentd's turn wanted next (a third of the fake's
// CPU in the overhead part).
const fakeMemoryLimit = 256 << 20

// ServeOverheadFake runs the overhead part's fake in this process: it
// writes the fake's URL as one line to w and serves until until ends (the
// parent closes the pipe, or dies). cpuProfile, when set, names the file
// the fake's CPU is profiled into over its whole serving life. It sets the
// process's collector: call it only in a process of its own.
func ServeOverheadFake(window int, cpuProfile string, w io.Writer, until io.Reader) (err error) {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(fakeMemoryLimit)
	stopProfile, err := Profiles{CPU: cpuProfile}.start()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()
	fake := newOverheadFake(window)
	defer fake.Close()
	if _, err := fmt.Fprintln(w, fake.URL()); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, until)
	return err
}

// startOverheadFake starts the overhead and scale parts' fake in a child
// process of self (the bench's binary, `self overhead-fake --window N`), or
// in this process when self is empty. Apart, the fake's CPU is profiled
// into prof's CPU file with ".fake" appended, when prof names one.
func startOverheadFake(ctx context.Context, self string, window int, prof Profiles) (url string, stop func(), err error) {
	if self == "" {
		fake := newOverheadFake(window)
		return fake.URL(), fake.Close, nil
	}
	args := []string{"overhead-fake", "--window", strconv.Itoa(window)}
	if prof.CPU != "" {
		args = append(args, "--cpuprofile", prof.CPU+".fake")
	}
	cmd := exec.CommandContext(ctx, self, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start the fake: %w", err)
	}
	stop = func() {
		_ = in.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("the fake's URL: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// childrenCPU is the CPU time of this process's children that have ended.
func childrenCPU() time.Duration { return rusageCPU(syscall.RUSAGE_CHILDREN) }

func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// quiesce waits until this process uses less than 5% of a core over 200 ms
// (at most two minutes).
func quiesce(ctx context.Context) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		before := processCPU()
		time.Sleep(200 * time.Millisecond)
		if processCPU()-before < 10*time.Millisecond {
			return
		}
	}
}

// fsyncMS times synced 4 KB writes in dir, as `dd if=/dev/zero of=dir/f
// bs=4k count=200 oflag=dsync` does, and returns one write's time.
func fsyncMS(dir string) (float64, error) {
	took, err := syncedWrites(dir, 200, 4096, 0, false)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, ms := range took {
		sum += ms
	}
	return round3(sum / float64(len(took))), nil
}

// pacedSyncMS is the disk's own spread at a turn's pace: 1,000 synced
// 1.5 KB appends (a turn's frame) to a zero-filled file, as the store's
// journal is, one a millisecond. On a virtual machine a sync that follows
// an idle gap can wait far longer than one of a back-to-back run
// (fsyncMS): its p99 is the floor of a turn's, whatever agentd does.
func pacedSyncMS(dir string) (Quantiles, error) {
	took, err := syncedWrites(dir, 1000, 1536, time.Millisecond, true)
	if err != nil {
		return Quantiles{}, err
	}
	return quantiles(took), nil
}

// syncedWrites appends n writes of size bytes, each synced (O_DSYNC), to
// a new file in dir, sleeping pause after each, and returns each write's
// time in ms. With prefill the file is zero-filled first, so a write
// changes no metadata its sync must carry.
func syncedWrites(dir string, n, size int, pause time.Duration, prefill bool) ([]float64, error) {
	path := filepath.Join(dir, "fsync-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_DSYNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	if prefill {
		if _, err := f.Write(make([]byte, n*size)); err != nil {
			return nil, errors.Join(err, f.Close())
		}
	}
	buf := make([]byte, size)
	took := make([]float64, n)
	for i := range took {
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i*size)); err != nil {
			return nil, errors.Join(err, f.Close())
		}
		took[i] = msOf(time.Since(start))
		time.Sleep(pause)
	}
	return took, f.Close()
}

// pasted is n bytes of the replay's own messages, one after another: a
// long text the person pastes.
func pasted(rp *Replay, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(rp.Turns[i%len(rp.Turns)].User)
		b.WriteByte('\n')
	}
	return strings.ToValidUTF8(b.String()[:n], "")
}

// OverheadShape is the chat the overhead part measures: Stored messages
// before it, Turns measured, on a Window; each turn's message is a short
// question, or MessageBytes of text when set.
type OverheadShape struct {
	Stored, Turns, Window, MessageBytes int
}

// Overhead stores sh.Stored messages in a chat (half the person's, half the
// answers), then measures turns on it. self, when set, is the bench's own
// binary, which runs the fake apart (ServeOverheadFake).
func Overhead(ctx context.Context, self string, sh OverheadShape, prof Profiles) (*OverheadResult, error) {
	stored, turns, window := sh.Stored, sh.Turns, sh.Window
	url, stopFake, err := startOverheadFake(ctx, self, window, prof)
	if err != nil {
		return nil, err
	}
	defer stopFake()
	dir, err := os.MkdirTemp("", "agentd-bench-overhead-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(ctx, daemonOptions{dir: dir, fakeURL: url, window: window})
	if err != nil {
		return nil, err
	}
	defer d.close()
	id, err := d.newChat(ctx, "")
	if err != nil {
		return nil, err
	}
	rp := NewReplay(11, stored/2, "")
	batch := make([]chat.Message, 0, 1000)
	now := time.Now().UTC()
	for i := 0; i < stored; i += 2 {
		t := rp.Turns[(i/2)%len(rp.Turns)]
		batch = append(batch, chat.Message{Role: chat.RoleUser, Content: t.User, CreatedAt: now},
			chat.Message{Role: chat.RoleAssistant, Content: t.Answer, CreatedAt: now})
		if len(batch) >= 1000 || i+2 >= stored {
			if _, err := d.hub.Store().Append(ctx, id, batch...); err != nil {
				return nil, fmt.Errorf("store backlog: %w", err)
			}
			batch = batch[:0]
		}
	}
	drv := d.drive(id)
	defer drv.close()
	res := &OverheadResult{StoredMessages: stored, Window: window, Turns: turns, MessageBytes: sh.MessageBytes, FakeApart: self != ""}
	ask := strings.Repeat("how does this part work? ", 4)
	if sh.MessageBytes > 0 {
		ask = pasted(rp, sh.MessageBytes)
	}
	if res.FsyncMS[0], err = fsyncMS(dir); err != nil {
		return nil, fmt.Errorf("fsync probe: %w", err)
	}
	var wall, over, cpu, plainOver, foldOver, plainCPU, foldCPU []float64
	var stopProf func() error
	var durable0 *dto.Histogram
	for i := range turns + 1 {
		before, cpuBefore, folds := d.model.total(), processCPU(), drv.folds.Load()
		out, err := drv.send(ctx, fmt.Sprintf("Question %d: %s", i, ask))
		if err != nil {
			return nil, fmt.Errorf("overhead turn %d: %w", i, err)
		}
		if p := out.result.Problem; p != nil {
			return nil, fmt.Errorf("overhead turn %d: %s: %s", i, p.Kind, p.Message)
		}
		if i == 0 {
			res.FirstTurnMS = round3(msOf(out.wall))
			// The backlog's fold goes on learning in the background: the
			// turns measured are those of a chat that has settled.
			quiesce(ctx)
			if durable0, err = d.durableReading(); err != nil {
				return nil, err
			}
			if stopProf, err = prof.start(); err != nil {
				return nil, err
			}
			continue
		}
		o, c := msOf(out.wall-(d.model.total()-before)), msOf(processCPU()-cpuBefore)
		wall, over, cpu = append(wall, msOf(out.wall)), append(over, o), append(cpu, c)
		if drv.folds.Load() != folds {
			foldOver, foldCPU = append(foldOver, o), append(foldCPU, c)
		} else {
			plainOver, plainCPU = append(plainOver, o), append(plainCPU, c)
		}
	}
	if err := stopProf(); err != nil {
		return nil, err
	}
	durable1, err := d.durableReading()
	if err != nil {
		return nil, err
	}
	res.StoreDurableMS = durableBetween(durable0, durable1)
	if res.FsyncMS[1], err = fsyncMS(dir); err != nil {
		return nil, fmt.Errorf("fsync probe: %w", err)
	}
	if res.PacedSyncMS, err = pacedSyncMS(dir); err != nil {
		return nil, fmt.Errorf("paced sync probe: %w", err)
	}
	res.TurnMS, res.OverheadMS, res.CPUMS = quantiles(wall), quantiles(over), quantiles(cpu)
	res.PlainOverheadMS, res.FoldOverheadMS = quantiles(plainOver), quantiles(foldOver)
	res.PlainCPUMS, res.FoldCPUMS = quantiles(plainCPU), quantiles(foldCPU)
	return res, nil
}
