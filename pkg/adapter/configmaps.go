package adapter

import (
	"context"
	"errors"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/config"
)

// localConfigMapInformers watch the namespace-local copies of wva's
// ConfigMaps in watchNamespace ("" = all namespaces): one informer per
// name, selected by metadata.name, so only those ConfigMaps are cached
// (labeled or not: unlabeled ones are logged, not read) and RBAC can limit
// the list/watch to those names. None when the adapter may not list them
// (a warning says so) or when the watched namespace is the config
// namespace (there the global ConfigMaps apply).
func localConfigMapInformers(ctx context.Context, kube kubernetes.Interface, watchNamespace, configNamespace string) []informers.SharedInformerFactory {
	if watchNamespace == configNamespace {
		return nil
	}
	var out []informers.SharedInformerFactory
	for _, name := range []string{config.SaturationConfigMapName, config.ScaleToZeroConfigMapName, config.QueueingModelConfigMapName} {
		if err := mayWatch(ctx, kube, watchNamespace, name); err != nil {
			klog.InfoS("namespace-local ConfigMaps not read: the adapter may not list and watch them; the global ones apply everywhere",
				"configmap", name, "namespace", watchNamespace, "reason", err.Error())
			return nil
		}
		selector := fields.OneTermEqualSelector("metadata.name", name).String()
		out = append(out, informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(watchNamespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector })))
	}
	return out
}

// mayWatch asks the API server whether the adapter may list and watch the
// ConfigMaps named name in namespace.
func mayWatch(ctx context.Context, kube kubernetes.Interface, namespace, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, verb := range []string{"list", "watch"} {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Resource: "configmaps", Namespace: namespace, Name: name}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !r.Status.Allowed {
			return errors.New(verb + " denied")
		}
	}
	return nil
}

// unlabeledLog logs an unlabeled ConfigMap once per ConfigMap, not on every
// update, until it gets the label or is deleted.
type unlabeledLog struct{ seen sync.Map }

func (u *unlabeledLog) ignored(cm *corev1.ConfigMap) {
	if _, logged := u.seen.LoadOrStore(cm.Namespace+"/"+cm.Name, true); !logged {
		klog.InfoS(config.ErrUnlabeled.Error(), "configmap", klog.KObj(cm))
	}
}

func (u *unlabeledLog) forget(cm *corev1.ConfigMap) { u.seen.Delete(cm.Namespace + "/" + cm.Name) }

// configMapHandler applies wva's ConfigMaps to the store: global ones from
// the config namespace, namespace-local ones elsewhere, the persisted last
// valid entries; changed runs after each. The leader's opted-in decisions
// go to the follower's Memory (optInDecisions.apply).
func (a *Adapter) configMapHandler(changed func()) cache.ResourceEventHandler {
	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		switch {
		case cm.Name == OptInDecisionsConfigMapName && cm.Namespace == a.Options.ConfigNamespace:
			a.optIn.apply(cm.Data)
			return // not configuration
		case cm.Name == config.LastGoodConfigMapName && cm.Namespace == a.Options.ConfigNamespace:
			a.Config.SetLastGood(cm.Data)
		case config.IsConfigMapName(cm.Name):
			err := a.Config.ApplyConfigMap(a.Options.ConfigNamespace, cm)
			switch {
			case errors.Is(err, config.ErrUnlabeled):
				a.unlabeled.ignored(cm)
			case err != nil:
				a.unlabeled.forget(cm)
				klog.ErrorS(err, "rejected ConfigMap entries; last valid entries stay in force", "configmap", klog.KObj(cm))
				a.recorder.Eventf(cm, corev1.EventTypeWarning, "InvalidConfig", "%v", err)
			default:
				a.unlabeled.forget(cm)
				klog.InfoS("applied ConfigMap", "configmap", klog.KObj(cm), "global", cm.Namespace == a.Options.ConfigNamespace)
			}
		default:
			return
		}
		changed()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			cm, ok := obj.(*corev1.ConfigMap)
			switch {
			case !ok:
				return
			case cm.Name == OptInDecisionsConfigMapName && cm.Namespace == a.Options.ConfigNamespace:
				a.optIn.apply(nil)
				return
			case cm.Name == config.LastGoodConfigMapName && cm.Namespace == a.Options.ConfigNamespace:
				a.Config.SetLastGood(nil)
			case config.IsConfigMapName(cm.Name):
				a.unlabeled.forget(cm)
				a.Config.RemoveConfigMap(a.Options.ConfigNamespace, cm)
				klog.InfoS("ConfigMap deleted", "configmap", klog.KObj(cm), "global", cm.Namespace == a.Options.ConfigNamespace)
			default:
				return
			}
			changed()
		},
	}
}

// localOnly drops the config namespace's ConfigMaps from a cluster-wide
// local informer: the global informer handles them.
func (a *Adapter) localOnly(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{Handler: h, FilterFunc: func(obj any) bool {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		return ok && cm.Namespace != a.Options.ConfigNamespace
	}}
}
