package decision

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// InventoryTarget is what the inventory knows about a VA's scale target
// (Target is what the pipeline wants of it).
type InventoryTarget struct {
	// Resolved is false when the target does not exist or is unsupported;
	// Reason (a TargetResolved condition reason) and Message say why.
	Resolved bool
	Reason   string
	Message  string
	// SpecReplicas is the target's desired replica count (spec.replicas).
	SpecReplicas int32
	// ReadyPods are the names of Ready, non-terminating pods (for LWS: the
	// group leaders).
	ReadyPods []string
	// ReadyAt is when each Ready pod turned Ready (its Ready condition's
	// lastTransitionTime), by name; a pod missing has no known time.
	ReadyAt map[string]time.Time
	// PendingPods counts non-terminating pods that are not Ready yet.
	PendingPods int32
	// MaxNumSeqs and MaxNumBatchedTokens are the vLLM engine args in the
	// target's pod template (--max-num-seqs, --max-num-batched-tokens); 0
	// when not set there.
	MaxNumSeqs          int64
	MaxNumBatchedTokens int64
	// StartupAllowance is how long the pod template's startupProbe lets a
	// container start (initialDelaySeconds + failureThreshold x
	// periodSeconds, the longest container); 0 without a startupProbe.
	StartupAllowance time.Duration
	// StartupDelay is the measured median time from creation to Ready of
	// the target's Ready pods; 0 when none gives a measurement.
	StartupDelay time.Duration
	// PodSelector selects every pod of the target (for an LWS, workers
	// too: they hold GPUs) and NodeSelector is its pod template's; the GPU
	// budget uses them to see what the variant holds and on which pool.
	PodSelector  labels.Selector
	NodeSelector map[string]string
	// PodLabels are the pod template's labels (an LWS's leader template),
	// which an InferencePool's selector is matched against.
	PodLabels map[string]string
	// Role is the variant's part in prefill/decode disaggregated serving,
	// from the pod template's llm-d.ai/role label.
	Role Role
}

// View is one VA with its target.
type View struct {
	VA     *llmdv1alpha1.VariantAutoscaling
	Target InventoryTarget
}
