package hub

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/agentd/agentd/actors/cluster"
	"github.com/agentd/agentd/chat"
)

// Metrics are agentd's Prometheus metrics, on a registry of their own (no
// global state, so tests can build many hubs).
type Metrics struct {
	Registry *prometheus.Registry
	turns    *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	folds    *prometheus.CounterVec
	heals    prometheus.Counter
	sessions prometheus.Gauge
	waiting  prometheus.Gauge
	durable  prometheus.Histogram
	// swept and sweptBytes count the stored files no tenant held that
	// the sweep deleted, and their bytes.
	swept, sweptBytes prometheus.Counter
	// byProblem holds a *turnCounters per problem kind (a small fixed
	// set), made at its first turn so each series appears when it did;
	// byPurpose a *tokenCounters per purpose, the same way.
	byProblem, byPurpose sync.Map
}

// What provider tokens were spent on: agentd_tokens_total's purpose.
const (
	PurposeTurn    = "turn"    // the chats' turns
	PurposeSummary = "summary" // the summariser's folds and condensed turn states
	PurposeLearn   = "learn"   // the learner's extractions of memories
)

// turnCounters are the counters a turn moves, resolved once: looking each
// up by its label hashed and matched the label on every turn.
type turnCounters struct {
	turns  prometheus.Counter
	tokens *tokenCounters
}

// tokenCounters are one purpose's token counters, by direction: cached
// is the part of in served from the provider's cache, reasoning the part
// of out the model spent reasoning.
type tokenCounters struct{ in, out, cached, reasoning prometheus.Counter }

func (c *tokenCounters) add(u chat.Usage) {
	u = u.Sane() // a counter that went down would panic
	c.in.Add(float64(u.InputTokens))
	c.out.Add(float64(u.OutputTokens))
	c.cached.Add(float64(u.CachedTokens))
	c.reasoning.Add(float64(u.ReasoningTokens))
}

func newMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		turns:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_turns_total", Help: "Turns finished, by problem kind (empty: answered)."}, []string{"problem"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_tokens_total",
			Help: "Tokens reported by providers, by purpose (turn, summary, learn) and direction (in, out; cached is part of in, reasoning part of out)."}, []string{"purpose", "direction"}),
		folds:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_folds_total", Help: "Folds applied, by whether a summary came back."}, []string{"summary"}),
		heals:    prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_heals_total", Help: "\"Too long\" refusals healed without the person seeing them."}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_session_actors", Help: "Live session actors."}),
		waiting:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_turns_waiting", Help: "Turns queued in session mailboxes behind a running turn."}),
		durable: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentd_store_durable_seconds",
			Help:    "Time a batch of writes that must be durable took to commit and sync (Badger: the journal's fdatasync; Postgres: the COMMIT). Every durable write waits this; its tail is the disk's.",
			Buckets: durableBuckets()}),
		swept:      prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_attachments_swept_total", Help: "Stored attachment files that no tenant held any more, deleted by the sweep."}),
		sweptBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_attachments_swept_bytes_total", Help: "Bytes of the attachment files the sweep deleted."}),
	}
	m.Registry.MustRegister(m.turns, m.tokens, m.folds, m.heals, m.sessions, m.waiting, m.durable, m.swept, m.sweptBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// durableBuckets are the durable batches' bucket bounds: 20 µs to 5 s (a
// fast disk's sync to a stalled one's), at 1, 1.5, 2, 3, 4, 5 and 7 of
// each power of ten. Neighbours are at most 1.5 apart, fine enough for a
// p99 read off them, and every bound is a round number a dashboard can
// name (powers of √2 made every other label irrational).
func durableBuckets() []float64 {
	var bs []float64
	for exp := -5; exp <= 0; exp++ {
		for _, m := range []string{"1", "1.5", "2", "3", "4", "5", "7"} {
			b, _ := strconv.ParseFloat(m+"e"+strconv.Itoa(exp), 64) // the float nearest the decimal, so it prints as written
			if b >= 20e-6 && b <= 5 {
				bs = append(bs, b)
			}
		}
	}
	return bs
}

// TurnDone counts a finished turn and its tokens.
func (m *Metrics) TurnDone(problem string, u chat.Usage) {
	v, ok := m.byProblem.Load(problem)
	if !ok {
		v, _ = m.byProblem.LoadOrStore(problem, &turnCounters{turns: m.turns.WithLabelValues(problem), tokens: m.tokensOf(PurposeTurn)})
	}
	c := v.(*turnCounters)
	c.turns.Inc()
	c.tokens.add(u)
}

// Tokens counts tokens a provider reported for purpose (a Purpose
// constant) outside a turn: the summariser's and the learner's calls. It
// is safe for concurrent use.
func (m *Metrics) Tokens(purpose string, u chat.Usage) {
	if u == (chat.Usage{}) {
		return // nothing spent: no series for it
	}
	m.tokensOf(purpose).add(u)
}

func (m *Metrics) tokensOf(purpose string) *tokenCounters {
	if v, ok := m.byPurpose.Load(purpose); ok {
		return v.(*tokenCounters)
	}
	v, _ := m.byPurpose.LoadOrStore(purpose, &tokenCounters{in: m.tokens.WithLabelValues(purpose, "in"),
		out: m.tokens.WithLabelValues(purpose, "out"), cached: m.tokens.WithLabelValues(purpose, "cached"),
		reasoning: m.tokens.WithLabelValues(purpose, "reasoning")})
	return v.(*tokenCounters)
}

// Fold counts a fold; ok false means the summariser gave no summary.
func (m *Metrics) Fold(ok bool) {
	label := "yes"
	if !ok {
		label = "no"
	}
	m.folds.WithLabelValues(label).Inc()
}

// Heal counts a healed refusal.
func (m *Metrics) Heal() { m.heals.Inc() }

// AttachmentsSwept counts stored files a sweep deleted and their bytes.
func (m *Metrics) AttachmentsSwept(files int, bytes int64) {
	m.swept.Add(float64(files))
	m.sweptBytes.Add(float64(bytes))
}

// ActiveSessions moves the live-session gauge.
func (m *Metrics) ActiveSessions(delta int) { m.sessions.Add(float64(delta)) }

// TurnsWaiting moves the gauge of turns queued behind a running one.
func (m *Metrics) TurnsWaiting(delta int) { m.waiting.Add(float64(delta)) }

// watchStore exports the store's sizes.
func (m *Metrics) watchStore(sizes func() (lsm, vlog int64)) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentd_badger_lsm_bytes", Help: "Size of Badger's LSM tree."}, func() float64 { l, _ := sizes(); return float64(l) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentd_badger_vlog_bytes", Help: "Size of Badger's value log."}, func() float64 { _, v := sizes(); return float64(v) }),
	)
}

// watchCluster exports this node's view of the cluster (cluster mode);
// whether it is registered only where the provider says (etcd).
func (m *Metrics) watchCluster(state func() cluster.State) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentd_cluster_members", Help: "Members of the cluster this node sees, itself included."},
			func() float64 { return float64(state().Members) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentd_cluster_records_skipped_total",
			Help: "Records under the cluster's etcd key skipped as not a member's, each time one was read."},
			func() float64 { return float64(state().RecordsSkipped) }),
	)
	if state().Registered != nil {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentd_cluster_registered",
			Help: "1 while this node's record is in etcd on a lease kept alive, else 0."},
			func() float64 {
				if *state().Registered {
					return 1
				}
				return 0
			}))
	}
}

// storeDurable observes a durable batch's commit and sync (the store's
// ObserveDurable).
func (m *Metrics) storeDurable(d time.Duration) { m.durable.Observe(d.Seconds()) }

// StoreDurable is the histogram of the store's durable batches so far.
func (m *Metrics) StoreDurable() (*dto.Histogram, error) {
	pm := &dto.Metric{}
	if err := m.durable.Write(pm); err != nil {
		return nil, err
	}
	return pm.GetHistogram(), nil
}

// Heals returns how many refusals were healed.
func (m *Metrics) Heals() float64 { return counterValue(m.heals) }

func counterValue(c prometheus.Counter) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	pm := &dto.Metric{}
	if err := (<-ch).Write(pm); err != nil {
		return 0
	}
	return pm.GetCounter().GetValue()
}
