package selector_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/policy/selector"
)

func req(key string, op selector.Op, values ...string) selector.Requirement {
	return selector.Requirement{Key: key, Op: op, Values: values}
}

func TestRequirementMatches(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front", "empty": ""}
	for _, tc := range []struct {
		r    selector.Requirement
		want bool
	}{
		{req("app", selector.Equals, "web"), true},
		{req("app", selector.Equals, "db"), false},
		{req("absent", selector.Equals, "web"), false},
		{req("empty", selector.Equals, ""), true},
		{req("absent", selector.Equals, ""), false},
		{req("app", selector.NotEquals, "web"), false},
		{req("app", selector.NotEquals, "db"), true},
		{req("absent", selector.NotEquals, "web"), true}, // an absent key is not equal
		{req("app", selector.In, "db", "web"), true},
		{req("app", selector.In, "db", "cache"), false},
		{req("absent", selector.In, "web"), false},
		{req("app", selector.NotIn, "db", "web"), false},
		{req("app", selector.NotIn, "db"), true},
		{req("absent", selector.NotIn, "web"), true}, // an absent key is in no list
		{req("app", selector.Exists), true},
		{req("empty", selector.Exists), true},
		{req("absent", selector.Exists), false},
		{req("app", selector.DoesNotExist), false},
		{req("absent", selector.DoesNotExist), true},
	} {
		require.Equal(t, tc.want, tc.r.Matches(labels), "%s %s %v", tc.r.Key, tc.r.Op, tc.r.Values)
		require.Equal(t, tc.want, tc.r.Matches(labels), "again")
		// A nil label map is a map with every key absent.
		absent := tc.r
		absent.Key = "absent"
		require.Equal(t, absent.Matches(map[string]string{}), absent.Matches(nil))
	}
}

func TestSelectorMatchesEndpointAndNamespace(t *testing.T) {
	ns := map[string]string{"kubernetes.io/metadata.name": "shop", "env": "prod"}
	web := map[string]string{"app": "web"}
	all := selector.Selector{}
	require.True(t, all.Matches(nil, nil), "an empty selector selects every endpoint")
	require.True(t, all.Matches(web, ns))
	own := selector.Selector{Namespace: []selector.Requirement{req("kubernetes.io/metadata.name", selector.Equals, "shop")}}
	require.True(t, own.Matches(nil, ns))
	require.False(t, own.Matches(web, map[string]string{"kubernetes.io/metadata.name": "other"}))
	require.False(t, own.Matches(web, nil), "a namespace without labels")
	both := selector.Selector{
		Endpoint:  []selector.Requirement{req("app", selector.Equals, "web")},
		Namespace: []selector.Requirement{req("env", selector.NotIn, "dev")},
	}
	require.True(t, both.Matches(web, ns))
	require.True(t, both.Matches(web, nil), "env absent: NotIn holds")
	require.False(t, both.Matches(map[string]string{"app": "db"}, ns))
	require.False(t, both.Matches(web, map[string]string{"env": "dev"}))
}

func TestSelectorString(t *testing.T) {
	a := selector.Selector{Endpoint: []selector.Requirement{
		req("tier", selector.In, "b", "a", "b"), req("app", selector.Equals, "web"), req("app", selector.Equals, "web"),
		req("x", selector.DoesNotExist), req("y", selector.Exists), req("z", selector.NotIn, "q"),
	}}
	require.Equal(t, "!x, app=web, tier in (a,b), y, z!=q", a.String())
	b := selector.Selector{Endpoint: []selector.Requirement{
		req("z", selector.NotEquals, "q"), req("y", selector.Exists), req("x", selector.DoesNotExist),
		req("tier", selector.In, "a", "b"), req("app", selector.In, "web"),
	}}
	require.Equal(t, a.String(), b.String(), "the same selector, written otherwise")
	require.Equal(t, selector.SetID(a), selector.SetID(b))
	require.Equal(t, "all()", selector.Selector{}.String())
	require.Equal(t, "all()", selector.Selector{Namespace: []selector.Requirement{}}.String())
	ns := selector.Selector{Namespace: []selector.Requirement{req("env", selector.NotIn, "dev", "test")}}
	require.Equal(t, "all() | namespace: env notin (dev,test)", ns.String())
	require.NotEqual(t, selector.SetID(ns), selector.SetID(selector.Selector{}))
	require.Equal(t, "k notin (a,b)", selector.Selector{Endpoint: []selector.Requirement{req("k", selector.NotIn, "b", "a")}}.String())
}

func TestSelectorValidate(t *testing.T) {
	for _, r := range []selector.Requirement{
		req("app", selector.Equals, "web"), req("example.com/app", selector.NotEquals, ""),
		req("a", selector.In, "x", "y"), req("a", selector.NotIn, "x"), req("a", selector.Exists), req("a", selector.DoesNotExist),
	} {
		require.NoError(t, selector.Selector{Endpoint: []selector.Requirement{r}}.Validate(), "%+v", r)
	}
	for _, r := range []selector.Requirement{
		req("", selector.Equals, "web"), req("a b", selector.Equals, "x"), req("/a", selector.Exists),
		req("a/", selector.Exists), req("app", selector.Equals), req("app", selector.Equals, "a", "b"),
		req("app", selector.In), req("app", selector.Exists, "x"), req("app", selector.DoesNotExist, "x"),
		req("app", 0), req("app", 99), req("app", selector.Equals, "a,b"), req("app", selector.In, "(x)"),
	} {
		err := selector.Selector{Namespace: []selector.Requirement{r}}.Validate()
		require.ErrorIs(t, err, selector.ErrInvalidSelector, "%+v", r)
	}
}

func TestOpText(t *testing.T) {
	for _, op := range []selector.Op{selector.Equals, selector.NotEquals, selector.In, selector.NotIn, selector.Exists, selector.DoesNotExist} {
		b, err := op.MarshalText()
		require.NoError(t, err)
		var back selector.Op
		require.NoError(t, back.UnmarshalText(b))
		require.Equal(t, op, back)
	}
	var o selector.Op
	require.Error(t, o.UnmarshalText([]byte("equals")))
	require.Equal(t, "Op(9)", selector.Op(9).String())
}
