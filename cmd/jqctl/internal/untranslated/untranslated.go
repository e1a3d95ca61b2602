// Package untranslated keeps kubectl's help texts untranslated. jqctl
// links kubectl's get command only for its custom-columns printer, and
// that package translates its own help when it is initialised: loading
// the translation catalogue took about 30 ms of every jqctl run, the
// simplest included. kubectl's i18n package documents this hook
// (SetLoadTranslationsFunc, set from a package initialised before any
// caller of i18n.T); its strings then read as their English defaults,
// which is what kubectl prints without a translation.
package untranslated

import "k8s.io/kubectl/pkg/util/i18n"

func init() {
	if err := i18n.SetLoadTranslationsFunc(func() error { return nil }); err != nil {
		panic(err)
	}
}
