// Package inventory owns which variants exist, what they scale and what
// their pods are, read from informer caches with no API calls. The engine
// consumes it through its ViewSource interface and the plain
// decision.View and decision.InventoryTarget; this package never imports the engine.
//
// Variants are VariantAutoscalings and user-owned autoscaling/v2 HPAs or
// KEDA ScaledObjects that opt in by annotations, as upstream WVA v0.9 does
// (llm-d.ai/managed, llm-d.ai/model-id, llm-d.ai/variant-cost). Such an
// object becomes an in-memory VariantAutoscaling named after it, so the
// engine, the provider and the KEDA scaler treat it like any VA; its
// decisions live in a Memory instead of VA status, and wva never writes the
// object.
//
// ResolveTarget finds a variant's scaleTargetRef (Deployment, StatefulSet
// or LeaderWorkerSet); the inventory and the scale-from-zero fast path both
// use it, so they agree on what a target is. A LeaderWorkerSet replica is a
// group (spec.replicas, the /scale subresource) of
// spec.leaderWorkerTemplate.size pods (default 1): a leader and size-1
// workers, all labelled with the set's name. The leader (worker index 0)
// serves and reports metrics, so it alone counts as the replica
// (ServingSelector); every pod holds GPUs (PodSelector). The leader's
// template (leaderTemplate, else workerTemplate, as the LWS controller does)
// gives the engine args, startup probe and node selector.
package inventory
