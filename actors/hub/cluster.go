package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/actors/cluster"
	"github.com/agentd/agentd/actors/session"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/persistence"
)

// ErrUnavailable: in cluster mode, the node that owns a chat could not be
// found or reached; nothing was stored, try again shortly.
var ErrUnavailable = errors.New("unavailable")

// joinCluster makes this node a member of the cluster the configuration
// names (nothing outside cluster mode). A chat's grain activating here
// wakes its session; deactivating passivates it; another node's toolset
// notice reloads that toolset from the store.
func (h *Hub) joinCluster(ctx context.Context, opts Options) error {
	if !h.cfg.Cluster.Enabled {
		return nil
	}
	if _, ok := h.store.(*persistence.Postgres); !ok {
		return errors.New("cluster mode needs store.kind postgres: every node reads and writes one store")
	}
	advertise := h.cfg.Cluster.AdvertiseHTTP
	if advertise == "" {
		advertise = opts.AdvertiseHTTP
	}
	if advertise == "" {
		advertise = "http://" + h.cfg.Listen
	}
	root := h.system.Root
	node, err := cluster.Join(ctx, h.system, h.cfg.Cluster, cluster.Config{
		AdvertiseHTTP: strings.TrimSuffix(advertise, "/"),
		Log:           h.log.With().Str("component", "cluster").Logger(),
		IdleAfter:     h.cfg.IdleAfter.Duration,
		Woken:         func(id string) { root.Send(h.registry, &session.Envelope{ChatID: id, Msg: &session.Wake{}}) },
		Moved:         func(id string) { root.Send(h.registry, &session.Moved{ChatID: id}) },
		ToolsetChanged: func(tenant, name string) {
			h.work.Go(func() { h.reloadToolset(h.ctx, tenant, name) })
		},
	})
	if err != nil {
		return err
	}
	h.node = node
	h.metrics.watchCluster(node.State)
	return nil
}

// clusterHealth is /healthz's cluster part: nil outside cluster mode.
func (h *Hub) clusterHealth() *api.ClusterHealth {
	if h.node == nil {
		return nil
	}
	s := h.node.State()
	return &api.ClusterHealth{Members: s.Members, Registered: s.Registered, RecordsSkipped: s.RecordsSkipped}
}

// Owner says where a tenant's chat is served: "" for this node (always
// outside cluster mode), else the owner node's HTTP base URL. The chat is
// resolved in the tenant first: another tenant's chat, or none, is
// ErrNotFound and activates nothing.
func (h *Hub) Owner(ctx context.Context, tenant, chatID string) (string, error) {
	if h.node == nil {
		return "", nil
	}
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return "", err
	}
	url, local, err := h.node.Locate(ctx, chatID)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if local {
		return "", nil
	}
	return url, nil
}

// announceToolset tells the other nodes that a tenant's toolset changed.
func (h *Hub) announceToolset(tenant, name string) {
	if h.node != nil {
		h.node.ToolsetChanged(tenant, name)
	}
}

// reloadToolset makes this node's tools and index hold a tenant's toolset
// as the store has it now (another node put or deleted it).
func (h *Hub) reloadToolset(ctx context.Context, tenant, name string) {
	if h.toolsetsReady(ctx, tenant) != nil {
		return // the hub is closing
	}
	var ts Toolset
	err := h.store.Record(persistence.ReadsFor(ctx, tenant), recordToolset, tenant+"/"+name, &ts)
	if errors.Is(err, persistence.ErrNotFound) {
		if _, err := h.tools.RemoveToolset(tenant, name); err != nil {
			h.log.Warn().Err(err).Str("tenant", tenant).Str("toolset", name).Msg("close toolset")
		}
		h.unindexToolset(tenant, name)
		return
	}
	if err != nil {
		h.log.Error().Err(err).Str("tenant", tenant).Str("toolset", name).Msg("reload toolset another node changed")
		return
	}
	h.installToolset(ctx, ts)
}
