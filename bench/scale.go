package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/persistence"
)

// ScaleResult is one run of many chats driven at once.
type ScaleResult struct {
	Chats        int     `json:"chats"`
	TurnsPerChat int     `json:"turns_per_chat"`
	MaxConns     int     `json:"max_provider_connections"`
	Seconds      float64 `json:"seconds"`
	TurnsPerSec  float64 `json:"turns_per_second"`
	Failed       int     `json:"failed_turns"`
	// CPUPerTurnMS is the process's CPU time (user and system) over the
	// turns, per turn: agentd's alone with the fake apart (FakeApart), else
	// agentd's and the fake's. FakeCPUPerTurnMS is the fake's, when apart
	// (its child process's whole CPU time, over the turns). The machine's
	// cores / (both) bound turns/s on an idle machine.
	CPUPerTurnMS     float64 `json:"cpu_per_turn_ms"`
	FakeCPUPerTurnMS float64 `json:"fake_cpu_per_turn_ms,omitempty"`
	FakeApart        bool    `json:"fake_apart"`
	// FsyncMS is one synced 4 KB write on the store's disk, before and
	// after the turns.
	FsyncMS [2]float64 `json:"fsync_ms"`
	// StoreDurableMS is the store's durable batches over the turns (group
	// commit: each carries the writes of many chats), as in OverheadResult.
	StoreDurableMS Quantiles `json:"store_durable_ms"`
	// CreatePerSec: chats created per second through the hub (the first
	// 1,000 of a run).
	CreatePerSec float64 `json:"hub_chats_created_per_second"`
	// Heap and RSS deltas over the run's start, per chat: while every chat
	// has a turn in flight (peak) and once all are idle but alive.
	ActiveHeapPerChatKB float64 `json:"active_heap_per_chat_kb"`
	ActiveRSSPerChatKB  float64 `json:"active_rss_per_chat_kb"`
	IdleHeapPerChatKB   float64 `json:"idle_heap_per_chat_kb"`
	IdleRSSPerChatKB    float64 `json:"idle_rss_per_chat_kb"`
	LiveSessions        int     `json:"live_sessions_after"`
	// Wake: GET context of a passivated chat (load from Badger) against the
	// same call on a live one.
	WakeMS   *Quantiles `json:"wake_ms,omitempty"`
	WarmMS   *Quantiles `json:"warm_context_ms,omitempty"`
	Passived int        `json:"passivated_before_wake,omitempty"`
	Note     string     `json:"note,omitempty"`
}

// raiseFileLimit lifts the soft open-files limit to the hard one: every
// turn in flight holds a client and a server socket in this process.
func raiseFileLimit() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	l.Cur = l.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

func settle() (heap, rss uint64) {
	runtime.GC()
	runtime.GC()
	return heapBytes(), rssBytes()
}

// Scale drives chats chats at once, turns each, on Badger on disk (every
// message synced), then measures idle memory; with wake set it lets the
// chats passivate and times waking wake of them. prof, when it names
// files, profiles the CPU of the turns and the heap once they are idle.
// self, when set, is the bench's own binary, which runs the fake apart
// (ServeOverheadFake): the CPU and heap measured are then agentd's alone.
func Scale(ctx context.Context, self string, chats, turns, wake int, prof Profiles) (*ScaleResult, error) {
	limit := raiseFileLimit()
	// Each turn in flight holds two sockets here; keep well under the limit.
	maxConns := int(min(uint64(4096), max(limit, 1024)/4))
	url, stopFake, err := startOverheadFake(ctx, self, 32000, prof)
	if err != nil {
		return nil, err
	}
	stopFake = sync.OnceFunc(stopFake)
	defer stopFake()
	children0 := childrenCPU()
	dir, err := os.MkdirTemp("", "agentd-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	idle := time.Hour
	if wake > 0 {
		idle = 3 * time.Second
	}
	d, err := startDaemon(ctx, daemonOptions{dir: dir, fakeURL: url, window: 32000, idleAfter: idle, maxConns: maxConns})
	if err != nil {
		return nil, err
	}
	defer d.close()
	res := &ScaleResult{}
	// Chats are spread over tenants of 100. The first createViaHub go
	// through the hub, whose creation rate is reported apart; the rest are
	// written to the store directly, to keep the run short.
	const createViaHub = 1000
	ids := make([]string, chats)
	tenants := make([]string, chats)
	t0 := time.Now()
	for i := range ids {
		tenants[i] = fmt.Sprintf("scale-%d", i/100)
		if i == createViaHub {
			res.CreatePerSec = round3(float64(i) / time.Since(t0).Seconds())
		}
		if i >= createViaHub {
			ids[i] = hub.NewID()
			if err := d.hub.Store().CreateChat(ctx, persistence.Chat{ID: ids[i], Tenant: tenants[i], Model: "fake/m", CreatedAt: time.Now().UTC()}); err != nil {
				return nil, err
			}
			continue
		}
		if ids[i], err = d.newChatFor(ctx, tenants[i]); err != nil {
			return nil, err
		}
	}
	if res.CreatePerSec == 0 {
		res.CreatePerSec = round3(float64(chats) / time.Since(t0).Seconds())
	}
	heap0, rss0 := settle()
	var peakHeap, peakRSS atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if h := heapBytes(); h > peakHeap.Load() {
					peakHeap.Store(h)
				}
				if r := rssBytes(); r > peakRSS.Load() {
					peakRSS.Store(r)
				}
			}
		}
	})
	var fsync [2]float64
	if fsync[0], err = fsyncMS(dir); err != nil {
		return nil, fmt.Errorf("fsync probe: %w", err)
	}
	durable0, err := d.durableReading()
	if err != nil {
		return nil, err
	}
	stopProfile, err := prof.start()
	if err != nil {
		return nil, err
	}
	var failed atomic.Int64
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), processCPU()
	for i, id := range ids {
		wg.Go(func() {
			for j := range turns {
				res, err := d.sendOnce(ctx, tenants[i], id, fmt.Sprintf("chat %d turn %d: please note this down.", i, j))
				if err != nil || res.Problem != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	secs, cpu := time.Since(start).Seconds(), processCPU()-cpu0
	durable1, err := d.durableReading()
	if err != nil {
		return nil, err
	}
	close(stop)
	sampler.Wait()
	// The provider connections are a pool bounded by maxConns, not any
	// chat's: the idle chats are measured without it.
	d.transport.CloseIdleConnections()
	if err := stopProfile(); err != nil {
		return nil, err
	}
	if fsync[1], err = fsyncMS(dir); err != nil {
		return nil, fmt.Errorf("fsync probe: %w", err)
	}
	heap1, rss1 := settle()
	per := func(a, b uint64) float64 {
		if a < b {
			return 0
		}
		return round3(float64(a-b) / 1024 / float64(chats))
	}
	res = &ScaleResult{Chats: chats, TurnsPerChat: turns, MaxConns: maxConns, Seconds: round3(secs), CreatePerSec: res.CreatePerSec,
		TurnsPerSec: round3(float64(chats*turns) / secs), Failed: int(failed.Load()),
		CPUPerTurnMS: round3(msOf(cpu) / float64(chats*turns)), FsyncMS: fsync, StoreDurableMS: durableBetween(durable0, durable1),
		ActiveHeapPerChatKB: per(peakHeap.Load(), heap0), ActiveRSSPerChatKB: per(peakRSS.Load(), rss0),
		IdleHeapPerChatKB: per(heap1, heap0), IdleRSSPerChatKB: per(rss1, rss0),
		LiveSessions: d.hub.ActiveSessions()}
	if wake > 0 {
		wake = min(wake, chats)
		warm := make([]float64, 0, wake)
		// Warm reads would keep the chats alive; time them on others.
		for i := wake; i < min(chats, 2*wake); i++ {
			t0 := time.Now()
			if _, err := d.hub.Context(ctx, tenants[i], ids[i]); err != nil {
				return nil, fmt.Errorf("warm context: %w", err)
			}
			warm = append(warm, msOf(time.Since(t0)))
		}
		deadline := time.Now().Add(time.Minute)
		for d.hub.ActiveSessions() > 0 && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
		}
		res.Passived = chats - max(d.hub.ActiveSessions(), 0)
		woke := make([]float64, 0, wake)
		for i := range wake {
			t0 := time.Now()
			if _, err := d.hub.Context(ctx, tenants[i], ids[i]); err != nil {
				return nil, fmt.Errorf("wake context: %w", err)
			}
			woke = append(woke, msOf(time.Since(t0)))
		}
		wq, hq := quantiles(woke), quantiles(warm)
		res.WakeMS, res.WarmMS = &wq, &hq
	}
	if res.FakeApart = self != ""; res.FakeApart {
		stopFake()
		res.FakeCPUPerTurnMS = round3(msOf(childrenCPU()-children0) / float64(chats*turns))
	}
	return res, nil
}
