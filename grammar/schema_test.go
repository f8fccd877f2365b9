package grammar

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// The grammars FromSchema makes are held to an independent JSON Schema
// validator, github.com/santhosh-tekuri/jsonschema (draft 2020-12 unless a
// schema says otherwise): a text the grammar matches must be one the
// validator accepts (soundness, the main property), and a valid text
// written the grammar's way (properties in declared order, whitespace
// within the ws bound, values spelled one way) must match.

// refValidator compiles schema with the reference validator; formats are
// asserted when formats is set (JSON Schema 2020-12 leaves them
// annotations by default). ok is false when it refuses the schema.
func refValidator(schema string, formats bool) (valid func(doc string) bool, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	c := jsonschema.NewCompiler()
	if formats {
		c.AssertFormat()
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return nil, false
	}
	if err := c.AddResource("schema.json", v); err != nil {
		return nil, false
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		return nil, false
	}
	return func(doc string) (valid bool) {
		defer func() {
			if recover() != nil {
				valid = false
			}
		}()
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		return err == nil && sch.Validate(inst) == nil
	}, true
}

func mustSchema(t testing.TB, schema string) (*Grammar, func(string) bool) {
	t.Helper()
	text, err := FromSchema([]byte(schema))
	require.NoError(t, err, schema)
	g, err := Parse(text)
	require.NoError(t, err, text)
	valid, ok := refValidator(schema, true)
	require.True(t, ok, "the reference validator refuses %s", schema)
	return g, valid
}

type schemaCase struct {
	name, schema string
	// docs are written the grammar's way: it must agree with the
	// validator on each.
	docs []string
	// outside are valid texts the grammar leaves out by design (property
	// order, spelling, kinds a schema without type takes too).
	outside []string
	// compact: the schema has object or array enum/const values, which
	// the grammar writes without whitespace.
	compact bool
}

func numbers(lo, hi int) []string {
	var out []string
	for n := lo; n <= hi; n++ {
		out = append(out, strconv.Itoa(n))
	}
	return out
}

func strs(lens ...int) []string {
	var out []string
	for _, n := range lens {
		out = append(out, `"`+strings.Repeat("é", n/2)+strings.Repeat("a", n-n/2)+`"`)
	}
	return out
}

func arrays(item string, lens ...int) []string {
	var out []string
	for _, n := range lens {
		out = append(out, "["+strings.TrimSuffix(strings.Repeat(item+",", n), ",")+"]")
	}
	return out
}

var schemaCases = []schemaCase{
	{name: "person", schema: `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":20},
		"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
		"required":["name","age"],"additionalProperties":false,"title":"Person","description":"ignored"}`,
		docs: []string{`{"name":"Ann","age":30}`, `{"name":"Ann","age":30,"tags":[]}`, `{"name":"Ann","age":30,"tags":["a","b","c"]}`,
			`{"name":"Ann","age":30,"tags":["a","b","c","d"]}`, `{"name":"","age":30}`, `{"name":"Ann"}`, `{"age":30}`,
			`{"name":"Ann","age":151}`, `{"name":"Ann","age":-1}`, `{"name":"Ann","age":150}`, `{"name":"Ann","age":0}`,
			`{"name":"Ann","age":3.5}`, `{"name":"Ann","age":30,"x":1}`, `{ "name": "Ann", "age": 30 }`,
			"{\n  \"name\": \"Ann\",\n  \"age\": 30\n}", "{\n\t\"name\":\t\"Ann\" ,\n \"age\" : 30}",
			`{"name":"12345678901234567890","age":1}`, `{"name":"123456789012345678901","age":1}`,
			`{"name":"é😀\n\"","age":1}`, `{"name":"\u00e9","age":1}`, `{"name":"Ann","age":30,}`, `{"name":"Ann" "age":30}`,
			`{"name":"Ann","age":030}`, `{"name":"Ann","age":30}x`, `["Ann",30]`},
		outside: []string{`{"age":30,"name":"Ann"}`, `{"name":"Ann","age":30.0}`, `{"name":"Ann","age":3e1}`,
			`{"name":"\ud83d\ude00","age":1}`, ` {"name":"Ann","age":30}`, "{\n\n\"name\":\"Ann\",\"age\":30}", `{"name":"Ann","age":30}` + "\n",
			`{"name":"Ann",` + strings.Repeat(" ", 22) + `"age":30}`}},
	{name: "nested", schema: `{"type":"object","properties":{"id":{"type":"integer"},
		"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
			"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["city","zip"],"additionalProperties":false},
		"geo":{"type":"object","properties":{"lat":{"type":"number"},"lon":{"type":"number"}},"required":["lat","lon"],
			"additionalProperties":false}},"required":["address"],"additionalProperties":false}`,
		docs: []string{`{"address":{"city":"X","zip":"12345"}}`,
			`{"id":1,"address":{"street":"S","city":"X","zip":"12345"},"geo":{"lat":1.5,"lon":-2e3}}`,
			`{"address":{"city":"X","zip":"1234"}}`, `{"address":{"city":"X","zip":"123456"}}`, `{"address":{"city":"X","zip":"1234a"}}`,
			`{"address":{"street":"S","zip":"12345"}}`, `{"id":1}`, `{"address":{"city":"X","zip":"12345"},"geo":{"lat":1}}`,
			`{"address":{"city":"X","zip":"12345"},"geo":{"lat":1,"lon":"2"}}`, `{"id":1.5,"address":{"city":"X","zip":"12345"}}`,
			`{"address": {"city": "X", "zip": "12345"}, "geo": {"lat": 0, "lon": 0}}`, `{"address":{"city":"X","zip":"12345","x":1}}`},
		outside: []string{`{"address":{"city":"X","zip":"\u0031\u0032\u0033\u0034\u0035"}}`, `{"address":{"zip":"12345","city":"X"}}`}},
	{name: "array bounds", schema: `{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4}`,
		docs: []string{`[]`, `[1]`, `[1,2]`, `[1,2,3,4]`, `[1,2,3,4,5]`, `[1,"2"]`, `[ 1 , 2 ]`, `[1,2,]`, "[\n 1,\n 2\n]",
			`[1.5,2]`, `{}`, `[-0,0]`}},
	{name: "enum", schema: `{"enum":["red","green",1,null,{"a":[1,2]},"tab\there","quote\"q",true,"é/<>&"]}`, compact: true,
		docs: []string{`"red"`, `"blue"`, `1`, `2`, `null`, `{"a":[1,2]}`, `{"a":[2,1]}`, `"tab\there"`, `"quote\"q"`, `true`,
			`false`, `"Red"`, `"é/<>&"`},
		outside: []string{`"green" `, `1.0`, `{ "a": [1, 2] }`, `"tab\u0009here"`, `"\u00e9/<>&"`, `"\u0072ed"`}},
	{name: "enum with other keywords", schema: `{"type":"string","enum":["a","bb","ccc",4],"minLength":2}`,
		docs: []string{`"a"`, `"bb"`, `"ccc"`, `4`, `"dd"`}},
	{name: "const", schema: `{"type":"object","properties":{"v":{"const":{"x":[true,null,"s"]}},"w":{"const":2.50}},"required":["v","w"],"additionalProperties":false}`,
		compact: true,
		docs:    []string{`{"v":{"x":[true,null,"s"]},"w":2.50}`, `{"v":{"x":[true,null]},"w":2.50}`, `{"v":{"x":[true,null,"s"]},"w":3}`},
		outside: []string{`{"v":{"x":[true,null,"s"]},"w":2.5}`}},
	{name: "anyOf", schema: `{"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":10},{"type":"null"}]}`,
		docs: []string{`"abc"`, `"abcd"`, `10`, `9`, `null`, `10.5`, `true`, `""`, `-10`, `12345678901234567890`, `[]`}},
	{name: "tree", schema: `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
		"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["value"],"additionalProperties":false}},
		"$ref":"#/$defs/node"}`,
		docs: []string{`{"value":1}`, `{"value":1,"children":[]}`, `{"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4}]}]}`,
			`{"value":1,"children":[{}]}`, `{"value":1,"children":[{"value":"x"}]}`,
			`{"value":1,"children":[{"value":1},{"value":1},{"value":1},{"value":1}]}`, `{"children":[]}`,
			`{"value":1,"children":[{"value":2,"extra":1}]}`, `{"value":1,"children":[{"value":2,"children":[{"value":3,"children":[{"value":4,"children":[]}]}]}]}`}},
	{name: "recursion through #", schema: `{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"boolean"}},"required":["v"],"additionalProperties":false}`,
		docs: []string{`{"v":true}`, `{"next":{"v":false},"v":true}`, `{"next":{},"v":true}`, `{"next":{"next":{"v":true},"v":true},"v":false}`, `{"next":null,"v":true}`}},
	{name: "recursion through $ref beside keywords", schema: `{"type":"object","properties":{"a":{"$ref":"#","required":["b"]},
		"b":{"type":"integer"}},"additionalProperties":false}`,
		docs: []string{`{}`, `{"b":1}`, `{"a":{"b":2}}`, `{"a":{}}`, `{"a":{"a":{"b":1},"b":2},"b":3}`, `{"a":{"a":{},"b":1}}`, `{"a":{"b":2,"c":1}}`}},
	{name: "recursion through $ref beside keywords, with anyOf", schema: `{"properties":{"a":{"$ref":"#","maxLength":2}},"anyOf":[{"type":"object"},{"type":"string"}]}`,
		docs:    []string{`{}`, `{"a":"xy"}`, `{"a":"xyz"}`, `{"a":{"a":{"a":"x"}}}`, `{"a":{"a":{"a":"xyz"}}}`, `"xyz"`, `{"a":1}`},
		outside: []string{`{"b":1}`}},
	{name: "nullable", schema: `{"type":"object","properties":{"x":{"type":["integer","null"]},"s":{"type":["string","null"],"maxLength":2}},"required":["x"]}`,
		docs:    []string{`{"x":null}`, `{"x":3}`, `{"x":"3"}`, `{"x":null,"s":null}`, `{"x":null,"s":"ab"}`, `{"x":null,"s":"abc"}`, `{}`, `{"s":null}`},
		outside: []string{`{"x":null,"y":1}`}},
	{name: "formats", schema: `{"type":"object","properties":{"d":{"type":"string","format":"date"},"t":{"type":"string","format":"time"},
		"dt":{"type":"string","format":"date-time"},"u":{"type":"string","format":"uuid"}},"additionalProperties":false}`,
		docs: []string{`{"d":"2024-02-29"}`, `{"d":"2023-02-29"}`, `{"d":"2000-02-29"}`, `{"d":"1900-02-29"}`, `{"d":"0000-02-29"}`,
			`{"d":"2024-04-31"}`, `{"d":"2024-12-31"}`, `{"d":"2024-13-01"}`, `{"d":"2024-1-01"}`, `{"d":"2024-00-10"}`, `{"d":"2024-01-00"}`,
			`{"t":"23:59:59Z"}`, `{"t":"24:00:00Z"}`, `{"t":"12:30:00.123+05:30"}`, `{"t":"12:30:00"}`, `{"t":"12:60:00Z"}`, `{"t":"12:00:00+24:00"}`,
			`{"dt":"2024-01-15T10:20:30Z"}`, `{"dt":"2024-01-15 10:20:30Z"}`, `{"dt":"2024-01-15T10:20:30-08:00"}`, `{"dt":"2024-02-30T10:20:30Z"}`,
			`{"u":"123e4567-e89b-12d3-a456-426614174000"}`, `{"u":"123e4567-e89b-12d3-a456-42661417400"}`,
			`{"u":"123E4567-E89B-12D3-A456-426614174000"}`, `{"u":"123e4567e89b12d3a456426614174000"}`, `{"u":"g23e4567-e89b-12d3-a456-426614174000"}`,
			`{"d":"2024-02-29","t":"00:00:00Z","dt":"2024-02-29T00:00:00Z","u":"00000000-0000-0000-0000-000000000000"}`, `{}`},
		outside: []string{`{"t":"23:59:60Z"}`, `{"dt":"2024-01-15t10:20:30z"}`}},
	{name: "integer and number", schema: `{"type":"object","properties":{"i":{"type":"integer"},"n":{"type":"number"}},"required":["i","n"],"additionalProperties":false}`,
		docs: []string{`{"i":1,"n":1}`, `{"i":-0,"n":-0.5e-3}`, `{"i":1.5,"n":1}`, `{"i":1,"n":"1"}`, `{"i":01,"n":1}`, `{"i":1,"n":1.}`,
			`{"i":12345678901234567890,"n":1E+40}`, `{"i":1,"n":.5}`, `{"i":1,"n":-}`},
		outside: []string{`{"i":1.0,"n":1}`, `{"i":1e2,"n":1}`}},
	{name: "tuple", schema: `{"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":{"type":"number"},"minItems":1,"maxItems":4}`,
		docs: []string{`["a"]`, `[]`, `["a",true]`, `["a",true,1,2.5]`, `["a",true,1,2,3]`, `[1]`, `["a",1]`, `["a",true,"x"]`}},
	{name: "closed tuple", schema: `{"prefixItems":[{"const":1},{"enum":["x","y"]}],"items":false}`,
		docs:    []string{`[]`, `[1]`, `[1,"x"]`, `[1,"y",3]`, `[2]`, `[1,"z"]`, `["x"]`},
		outside: []string{`5`, `"s"`, `{}`}},
	{name: "legacy tuple", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"integer"}],"additionalItems":{"type":"string"}}`,
		docs: []string{`[]`, `[1]`, `[1,"a","b"]`, `["a"]`, `[1,2]`}},
	{name: "additionalProperties schema", schema: `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"],
		"additionalProperties":{"type":"string"}}`,
		docs: []string{`{"id":1}`, `{"id":1,"name":"a"}`, `{"id":1,"x":"a"}`, `{"id":1,"name":"a","x":"a","y":"b"}`, `{"id":1,"x":2}`,
			`{"id":1,"name":2}`, `{"id":1,"id":"s"}`, `{"id":1,"name":"a","name":3}`, `{"id":1,"nam":"a"}`, `{"id":1,"namex":"a"}`,
			`{"id":1,"i":"a"}`, `{"id":1,"":"a"}`, `{"id":1,"\u0069d":"s"}`, `{"id":1,"nam\"e":"a"}`, `{"id":1,"na\nme":"a"}`, `{"x":"a"}`},
		outside: []string{`{"x":"a","id":1}`, `{"id":1,"\u0078":"a"}`}},
	{name: "map", schema: `{"type":"object","additionalProperties":{"type":"boolean"}}`,
		docs: []string{`{}`, `{"a":true}`, `{"a":true,"b":false}`, `{"a":1}`, `[]`, `{"a\u0000":true}`, `{"a":true,"a":false}`}},
	{name: "additionalProperties true", schema: `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true}`,
		docs: []string{`{}`, `{"a":1}`, `{"b":[1,{"c":null}]}`, `{"a":1,"b":"x"}`, `{"a":"x"}`, `{"a":1,"a":"x"}`, `{"b":1,"a":"x"}`}},
	{name: "oneOf with a discriminator", schema: `{"oneOf":[{"type":"object","properties":{"kind":{"const":"cat"},"lives":{"type":"integer","minimum":1,"maximum":9}},
		"required":["kind","lives"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"dog"},"good":{"type":"boolean"}},
		"required":["kind"],"additionalProperties":false}],"discriminator":{"propertyName":"kind"}}`,
		docs: []string{`{"kind":"cat","lives":9}`, `{"kind":"cat","lives":10}`, `{"kind":"dog"}`, `{"kind":"dog","good":true}`, `{"kind":"cat"}`,
			`{"kind":"dog","lives":3}`, `{"kind":"bird"}`, `{"kind":"cat","lives":0}`}},
	{name: "allOf and $ref", schema: `{"allOf":[{"$ref":"#/definitions/base"},{"properties":{"extra":{"type":"boolean"}},"required":["extra"]}],
		"definitions":{"base":{"type":"object","properties":{"id":{"type":"string","format":"uuid"}},"required":["id"]}}}`,
		docs: []string{`{"id":"123e4567-e89b-12d3-a456-426614174000","extra":true}`, `{"id":"x","extra":true}`,
			`{"id":"123e4567-e89b-12d3-a456-426614174000"}`, `{"extra":true}`}},
	{name: "siblings of anyOf and $ref", schema: `{"$defs":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/s","maxLength":2},
		"b":{"type":"integer"}},"additionalProperties":false,"anyOf":[{"required":["a"]},{"required":["b"]}]}`,
		docs: []string{`{"a":"x"}`, `{"b":1}`, `{"a":"x","b":1}`, `{}`, `{"a":"xyz"}`, `{"a":1}`}},
	{name: "pydantic", schema: `{"$defs":{"Pet":{"properties":{"name":{"title":"Name","type":"string"},
		"kind":{"enum":["cat","dog"],"title":"Kind","type":"string"}},"required":["name","kind"],"title":"Pet","type":"object"}},
		"properties":{"owner":{"title":"Owner","type":"string"},"age":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":null,"title":"Age"},
		"pets":{"items":{"$ref":"#/$defs/Pet"},"title":"Pets","type":"array"}},"required":["owner","pets"],"title":"Person","type":"object"}`,
		docs: []string{`{"owner":"a","pets":[]}`, `{"owner":"a","age":null,"pets":[{"name":"x","kind":"cat"}]}`, `{"owner":"a","age":1.5,"pets":[]}`,
			`{"owner":"a","pets":[{"name":"x","kind":"cow"}]}`, `{"owner":"a","pets":[{"name":"x"}]}`, `{"owner":"a","age":3,"pets":[{"name":"x","kind":"dog"}]}`}},
	{name: "long pattern", schema: `{"type":"string","pattern":"^(ab){2,3}c{998,1000}$"}`,
		docs: []string{`"abab` + strings.Repeat("c", 998) + `"`, `"ababab` + strings.Repeat("c", 1000) + `"`, `"abab` + strings.Repeat("c", 997) + `"`,
			`"abab` + strings.Repeat("c", 1001) + `"`, `"ab` + strings.Repeat("c", 999) + `"`}},
	{name: "every type", schema: `{"type":["object","array","string","number","boolean","null"],"minLength":2,"maxItems":1}`,
		docs: []string{`"a"`, `"ab"`, `1`, `{}`, `[1]`, `[1,2]`, `null`}},
	{name: "any value", schema: `{}`, docs: []string{`1`, `"x"`, `{"a":[1,{"b":null}]}`, `[]`, `tru`, `{"a":1,}`, `null`, `-1.5e3`}},
	{name: "true", schema: `true`, docs: []string{`1`, `"x"`, `{"a":[1,{"b":null}]}`, `[]`, `tru`}},
	{name: "optional properties", schema: `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"},
		"d":{"type":"null"}},"required":["b"],"additionalProperties":false}`,
		docs: []string{`{"b":"x"}`, `{"a":1,"b":"x"}`, `{"b":"x","c":true}`, `{"a":1,"b":"x","c":false}`, `{"a":1,"b":"x","d":null}`,
			`{"a":1,"b":"x","c":false,"d":null}`, `{"a":1}`, `{}`, `{"a":1,"c":true}`, `{"a":1,"b":"x",}`},
		outside: []string{`{"b":"x","a":1}`, `{"b":"x","d":null,"c":true}`}},
	{name: "all optional", schema: `{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"string"}},"additionalProperties":false}`,
		docs:    []string{`{}`, `{"z":1}`, `{"a":"x"}`, `{"z":1,"a":"x"}`, `{"z":"x"}`, `{,}`},
		outside: []string{`{"a":"x","z":1}`}},
	{name: "long strings", schema: `{"type":"string","minLength":1002,"maxLength":2015}`,
		docs: strs(0, 1, 1000, 1001, 1002, 1003, 1500, 1999, 2000, 2009, 2010, 2014, 2015, 2016, 2100)},
	{name: "long arrays", schema: `{"type":"array","items":{"const":0},"minItems":999,"maxItems":1003}`,
		docs: arrays("0", 0, 998, 999, 1000, 1001, 1002, 1003, 1004)},
	{name: "integer range", schema: `{"type":"integer","minimum":-15,"exclusiveMaximum":1234}`,
		docs: numbers(-40, 1300), outside: []string{`-0`, `1e2`}},
	{name: "integer range, fractional bounds", schema: `{"type":"integer","exclusiveMinimum":-1.5,"maximum":7.9}`, docs: numbers(-20, 20)},
	{name: "integer range, wide", schema: `{"type":"integer","minimum":99950,"maximum":1000049}`,
		docs: append(numbers(99900, 100100), numbers(999900, 1000100)...)},
	{name: "integer range, one side", schema: `{"type":"integer","exclusiveMinimum":-207}`, docs: numbers(-300, 30)},
	{name: "pattern", schema: `{"type":"string","pattern":"^[a-z]+(-[a-z0-9]+)*$"}`,
		docs: []string{`"abc"`, `"abc-d3"`, `"abc-"`, `"-abc"`, `"ABC"`, `""`, `"a-b-c"`, `"a--b"`}},
	{name: "unanchored pattern", schema: `{"type":"string","pattern":"ab+c|^x\\.|\\d$"}`,
		docs:    []string{`"abc"`, `"xxabbbcyy"`, `"ac"`, `"a\nbc"`, `"y\nabc\n"`, `"x."`, `"x.z"`, `"zx."`, `"x"`, `"a1"`, `"1a"`, `"\"abc"`},
		outside: []string{`"\u0061bc"`}},
	{name: "pattern with case folding and escapes", schema: `{"pattern":"^(?i)h(é|x)?[.\"\\\\\n]{1,2}$"}`,
		docs:    []string{`"h."`, `"HÉ."`, `"hx.."`, `"hy."`, `"h\""`, `"h\\\n"`, `"h"`, `"h..."`},
		outside: []string{`"h\u00e9."`, `5`, `"h\u002e"`}},
}

func TestFromSchemaMatchesValidator(t *testing.T) {
	for _, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g, valid := mustSchema(t, c.schema)
			nValid, nInvalid := 0, 0
			for _, doc := range c.docs {
				want := valid(doc)
				require.Equal(t, want, g.MatchString(doc), "%s\non %q", c.schema, doc)
				if want {
					nValid++
				} else {
					nInvalid++
				}
			}
			require.Greater(t, nValid, 0, "no valid text")
			require.Greater(t, nInvalid, 0, "no invalid text")
			for _, doc := range c.outside {
				require.True(t, valid(doc), "%q", doc)
				require.False(t, g.MatchString(doc), "%q", doc)
			}
		})
	}
}

func TestFromSchemaErrors(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"properties":{"age":{"type":"object","patternProperties":{"a":{}}}}}`, `json schema: /properties/age: unsupported keyword "patternProperties"`},
		{`{"not":{"type":"string"}}`, `json schema: unsupported keyword "not"`},
		{`{"if":{},"then":{}}`, `unsupported keyword "if"`},
		{`{"type":"strin"}`, `json schema: /type: unknown type "strin"`},
		{`{"type":[]}`, `/type: an empty list of types`},
		{`{"$ref":"#/$defs/missing"}`, `/$ref: $ref "#/$defs/missing" points at nothing`},
		{`{"$ref":"https://example.com/other.json"}`, `unsupported $ref`},
		{`{"$ref":"#anchor"}`, `anchors are not supported`},
		{`{"type":"string","minLength":-1}`, `/minLength: minLength must not be negative`},
		{`{"type":"string","maxLength":1.5}`, `/maxLength: maxLength must be an integer`},
		{`{"type":"array","items":{"type":"integer"},"uniqueItems":true}`, `unsupported keyword "uniqueItems"`},
		{`{"type":"array","contains":{"type":"integer"}}`, `unsupported keyword "contains"`},
		{`{"type":"integer","multipleOf":2}`, `unsupported keyword "multipleOf"`},
		{`{"type":"object","minProperties":1}`, `unsupported keyword "minProperties"`},
		{`{`, `json schema: invalid JSON: unexpected end`},
		{`{"a":1} x`, `invalid JSON: more follows the schema`},
		{`{"a":1,"a":2}`, `json schema: /a: key given twice`},
		{``, `invalid JSON`},
		{`{"type":"string","pattern":"(?m)^a$"}`, `/pattern: pattern: (?m:^) is not supported`},
		{`{"type":"string","pattern":"\\bword"}`, `/pattern: pattern: \b is not supported`},
		{`{"type":"string","pattern":"(a"}`, `/pattern: pattern "(a"`},
		{`{"type":"string","pattern":"^a","maxLength":3}`, `pattern together with format, minLength or maxLength`},
		{`{"type":"string","format":"date","maxLength":3}`, `format "date" together with minLength or maxLength`},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, `json schema: no JSON value matches the schema`},
		{`{"type":"object","required":["a"],"additionalProperties":false}`, `no JSON value matches the schema`},
		{`false`, `no JSON value matches the schema`},
		{`{"enum":[]}`, `no JSON value matches the schema`},
		{`{"$defs":{"a":{"type":"object","required":["x"],"properties":{"x":{"$ref":"#/$defs/a"}}}},"$ref":"#/$defs/a"}`, `no JSON value matches`},
		{`{"$ref":"#"}`, `a $ref loop that reads nothing`},
		{`{"$ref":"#","type":"object"}`, `the schema nests too deeply`},
		{`{"allOf":[{"$ref":"#/allOf/1"},{"$ref":"#/allOf/0"}]}`, `too large or complex`},
		{`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, `a $ref loop`},
		{`{"properties":{"a\nb":{"not":{}}}}`, `/properties/a\u000ab: unsupported keyword "not"`},
		{`[]`, `a schema must be an object or a boolean, not an array`},
		{`{"properties":{"a":3}}`, `/properties/a: a schema must be an object or a boolean, not a number`},
		{`{"anyOf":[]}`, `/anyOf: must be a non-empty list of schemas`},
		{`{"required":"a"}`, `/required: must be a list of strings`},
		{`{"$defs":{"x":{"$id":"x"}},"$ref":"#/$defs/x"}`, `unsupported keyword "$id" below the root`},
		{`{"allOf":[{"format":"date"},{"format":"time"}]}`, `cannot combine two different "format"`},
		{strings.Repeat("[", 300) + strings.Repeat("]", 300), `nested more than 256 deep`},
		{manyProperties(200, `{"type":"string","maxLength":1000}`), `too large or complex`},
		{`{"type":"integer","minimum":1e500}`, `/minimum: minimum is out of range`},
		{`{"type":"string","minLength":0.` + strings.Repeat("0", 500) + `1}`, `/minLength: minLength is out of range`},
	} {
		_, err := FromSchema([]byte(c.schema))
		require.Error(t, err, c.schema)
		require.Contains(t, err.Error(), c.want, c.schema)
		require.NotContains(t, err.Error(), "\n")
		var se *SchemaError
		require.ErrorAs(t, err, &se)
	}
}

func manyProperties(n int, schema string) string { return namedProperties("p", n, schema) }

func namedProperties(prefix string, n int, schema string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s%d":%s`, prefix, i, schema)
	}
	b.WriteString("}}")
	return b.String()
}

// TestFromSchemaLarge: many properties, big enums, long bounds. The
// matcher follows at most 4096 readings of a text at once: long lists of
// literals share their prefixes, and runs of optional properties are
// bounded.
func TestFromSchemaLarge(t *testing.T) {
	s := manyProperties(300, `{"type":["string","null"],"maxLength":20}`)
	g, valid := mustSchema(t, s)
	doc := `{"p0":"x","p150":null,"p299":"12345678901234567890"}`
	require.True(t, valid(doc))
	require.True(t, g.MatchString(doc))
	require.False(t, g.MatchString(`{"p150":null,"p0":"x"}`))
	require.False(t, g.MatchString(`{"p0":"123456789012345678901"}`))

	var vals, consts []string
	for i := range 5000 {
		vals = append(vals, strconv.Quote(fmt.Sprint("v", i)))
		if i%50 == 0 {
			consts = append(consts, fmt.Sprintf(`{"const":%d}`, i*7))
		}
	}
	g, valid = mustSchema(t, `{"enum":[`+strings.Join(vals, ",")+`,"v",1,12,{"a":1}]}`)
	for _, doc := range []string{`"v4999"`, `"v5000"`, `"v"`, `"v0"`, `"v00"`, `1`, `12`, `123`, `{"a":1}`, `{"a":12}`} {
		require.Equal(t, valid(doc), g.MatchString(doc), doc)
	}
	g, valid = mustSchema(t, `{"anyOf":[`+strings.Join(consts, ",")+`]}`)
	for _, doc := range []string{`0`, `7`, `350`, `693`, `700`, `3`} {
		require.Equal(t, valid(doc), g.MatchString(doc), doc)
	}

	// Big objects through allOf, a required property every 500.
	withRequired := func(s string, names ...string) string {
		return strings.TrimSuffix(s, "}") + `,"required":["` + strings.Join(names, `","`) + `"]}`
	}
	big := withRequired(manyProperties(3000, `{"type":"integer"}`), "p0", "p500", "p1000", "p1500", "p2000", "p2500")
	other := withRequired(namedProperties("q", 3000, `{"type":"boolean"}`), "q0", "q999", "q1998", "q2997")
	g, valid = mustSchema(t, `{"allOf":[`+big+`,`+other+`]}`)
	doc = `{"p0":1,"p7":1,"p500":0,"p1000":0,"p1500":0,"p2000":0,"p2500":0,"p2999":2,"q0":true,"q999":true,"q1998":false,"q2997":true}`
	require.True(t, valid(doc))
	require.True(t, g.MatchString(doc))
	require.False(t, g.MatchString(`{"p0":1}`))
	_, err := FromSchema([]byte(manyProperties(1001, `{}`)))
	require.ErrorContains(t, err, `json schema: /properties: more than 1000 optional properties in a row`)

	g, _ = mustSchema(t, `{"type":"string","maxLength":1e12}`)
	require.True(t, g.MatchString(`"`+strings.Repeat("x", 3000)+`"`))
	g, _ = mustSchema(t, `{"type":"string","maxLength":9223372036854775807000}`)
	require.True(t, g.MatchString(`"x"`))
}

// TestFromSchemaOutput pins what the grammar looks like for a simple
// schema, and that it is the same each time.
func TestFromSchemaOutput(t *testing.T) {
	s := `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":["integer","null"]}},"required":["z"]}`
	text, err := FromSchema([]byte(s))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(text,
		`root-a ::= integer | "null"`+"\n"+
			`root ::= "{" ws "\"z\"" ws ":" ws string ws ( "," ws "\"a\"" ws ":" ws root-a ws )? "}"`+"\n"), text)
	require.Contains(t, text, "\n"+scWS+"\n")
	for range 5 {
		again, err := FromSchema([]byte(s))
		require.NoError(t, err)
		require.Equal(t, text, again)
	}
	g := mustParse(t, text)
	require.True(t, g.MatchString(`{"z":"x","a":null}`))
	require.False(t, g.MatchString(`{"a":null,"z":"x"}`))
	// A prefix of a match can be continued, so a model is never stranded.
	doc := `{"z":"x","a":12}`
	for i := range len(doc) {
		require.True(t, g.Prefix(doc[:i]), doc[:i])
	}
}

// TestFromSchemaNoDeadEnds: an optional property whose schema no value
// matches (a recursion without an end) is left out, so a model that
// starts it is not stranded.
func TestFromSchemaNoDeadEnds(t *testing.T) {
	s := `{"$defs":{"a":{"type":"object","required":["x"],"properties":{"x":{"$ref":"#/$defs/a"}}}},
		"type":"object","properties":{"p":{"$ref":"#/$defs/a"},"q":{"type":"integer"}},"additionalProperties":false}`
	g, valid := mustSchema(t, s)
	require.False(t, g.Prefix(`{"p"`))
	require.True(t, g.MatchString(`{"q":1}`))
	require.True(t, valid(`{"q":1}`))
}

// ---- random documents ----

// docGen writes random JSON texts in the shape of a schema: properties
// in declared order, compact, strings escaped as the grammar writes them.
// Now and then it strays (a value of another kind, a property too many or
// missing, a count out of bounds); shape says whether it kept to the
// schema's shape (its texts then are the grammar's way, valid or not).
type docGen struct {
	r      *rand.Rand
	g      *schemaGen // to follow $refs and combine allOf
	shape  bool
	steady bool // no straying (inside long arrays)
}

// patternSamples are strings near the patterns of schemaCases, valid and
// not, that random strings would rarely hit.
var patternSamples = map[string][]string{
	`^[0-9]{5}$`:                    {"12345", "00000", "1234", "123456", "9876a"},
	`^[a-z]+(-[a-z0-9]+)*$`:         {"abc", "a-b1-c", "abc-", "-a", "x", "a--b", "A", "ab-9"},
	`ab+c|^x\.|\d$`:                 {"abbc", "zzabczz", "x.", "x.y", "a1", "1a", "ac", "x"},
	"^(?i)h(é|x)?[.\"\\\\\n]{1,2}$": {"h.", "HÉ.", "hx\\", "h\n\"", "hy.", "h", "h...", "H\n"},
	"^(ab){2,3}c{998,1000}$":        {"abab" + strings.Repeat("c", 998), "ababab" + strings.Repeat("c", 1000), "abab" + strings.Repeat("c", 997)},
}

func (d *docGen) chance(p float64) bool { return d.r.Float64() < p }

func (d *docGen) stray() bool {
	if !d.steady && d.chance(0.03) {
		d.shape = false
		return true
	}
	return false
}

var docStrings = []string{"", "a", "abc", "é", "😀", "tab\there", `q"uote`, `back\slash`, "line\nbreak", "x/y", "<&>", "\x01", "ab-c", "12345", "Zz"}

func (d *docGen) anyValue(depth int) string {
	switch n := d.r.IntN(8); {
	case n == 0 && depth < 3:
		return "[" + d.anyValue(depth+1) + "," + d.anyValue(depth+1) + "]"
	case n == 1 && depth < 3:
		return `{"k":` + d.anyValue(depth+1) + "}"
	case n == 2:
		return quoted(docStrings[d.r.IntN(len(docStrings))])
	case n == 3:
		return []string{"true", "false", "null"}[d.r.IntN(3)]
	case n == 4:
		return []string{"1.5", "-2e3", "0.25", "1E+2"}[d.r.IntN(4)]
	}
	return strconv.Itoa(d.r.IntN(2000) - 1000)
}

func quoted(s string) string { return scQuoted(s) }

func (d *docGen) count(s *jsonNode, k string) int {
	n, err := scCount(s, k, "")
	if err != nil || n < 0 || n == scHuge {
		return -1
	}
	return int(n)
}

// length picks a length near [lo, hi] (hi < 0: no bound).
func (d *docGen) length(lo, hi, typical int) int {
	lo = max(lo, 0)
	if hi < 0 {
		hi = lo + typical
	}
	n := lo + d.r.IntN(hi-lo+1)
	if d.stray() {
		n = max(0, []int{lo - 1, hi + 1}[d.r.IntN(2)])
	}
	return n
}

func (d *docGen) value(s *jsonNode, depth int) string {
	if s == nil || s.kind == jsBool || d.stray() {
		if s == nil || s.kind != jsBool || !s.b {
			d.shape = false
		}
		return d.anyValue(depth)
	}
	if ref := s.get("$ref"); ref != nil {
		rest := scWithout(s, "$ref")
		t, _, err := d.g.resolve(ref, "")
		if err != nil {
			return d.anyValue(depth)
		}
		if scHasConstraints(rest) {
			if m, err := d.g.conj(rest, t, ""); err == nil {
				return d.value(m, depth+1)
			}
		}
		return d.value(t, depth+1)
	}
	if all := s.get("allOf"); all != nil {
		m := scWithout(s, "allOf")
		for _, x := range all.elems {
			var err error
			if m, err = d.g.conj(m, x, ""); err != nil {
				return d.anyValue(depth)
			}
		}
		return d.value(m, depth)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if l := s.get(k); l != nil && len(l.elems) > 0 {
			b := l.elems[d.r.IntN(len(l.elems))]
			if m, err := d.g.conj(scWithout(s, k), b, ""); err == nil {
				return d.value(m, depth)
			}
			return d.anyValue(depth)
		}
	}
	if vals, ok, _ := scValues(s, ""); ok && len(vals) > 0 {
		return vals[d.r.IntN(len(vals))].text()
	}
	kinds, err := scKindsOf(s, "")
	if err != nil {
		return d.anyValue(depth)
	}
	var ks []scKinds
	for _, x := range scKindNames {
		if kinds&x.k != 0 {
			ks = append(ks, x.k)
		}
	}
	switch ks[d.r.IntN(len(ks))] {
	case kObject:
		return d.object(s, depth)
	case kArray:
		return d.array(s, depth)
	case kString:
		return d.string(s)
	case kNumber:
		return []string{"0", "-1", "3", "2.5", "1e3", "-0.5", "12345678901234567890", "1E-2"}[d.r.IntN(8)]
	case kInteger:
		return d.integer(s)
	case kBoolean:
		return []string{"true", "false"}[d.r.IntN(2)]
	}
	return "null"
}

func (d *docGen) object(s *jsonNode, depth int) string {
	var parts []string
	props := s.get("properties")
	req, _ := scStrings(s.get("required"), "")
	var names []string
	if props != nil {
		for i, k := range props.keys {
			names = append(names, k)
			r := false
			for _, x := range req {
				r = r || x == k
			}
			keep := d.chance(0.5) && depth < 4
			if r {
				keep = !d.stray()
			}
			if keep {
				parts = append(parts, quoted(k)+":"+d.value(props.vals[i], depth+1))
			}
		}
	}
	ap := s.get("additionalProperties")
	for _, k := range req {
		if props == nil || props.get(k) == nil {
			parts = append(parts, quoted(k)+":"+d.value(ap, depth+1))
		}
	}
	extras := ap != nil && !(ap.kind == jsBool && !ap.b) || ap == nil && props == nil && len(req) == 0
	if extras && d.chance(0.3) && depth < 4 {
		for range 1 + d.r.IntN(2) {
			k := []string{"x", "nam", "a\"b", "id", "", "zz", "name", "é"}[d.r.IntN(8)]
			if props != nil && props.get(k) != nil {
				d.shape = false // the grammar writes no declared name twice
			}
			parts = append(parts, quoted(k)+":"+d.value(ap, depth+1))
		}
	}
	if ap != nil && ap.kind == jsBool && !ap.b && d.stray() {
		parts = append(parts, `"extra":1`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (d *docGen) array(s *jsonNode, depth int) string {
	s, err := scLegacyItems(s, "")
	if err != nil {
		return "[]"
	}
	var prefix []*jsonNode
	if p := s.get("prefixItems"); p != nil {
		prefix = p.elems
	}
	lo, hi := d.count(s, "minItems"), d.count(s, "maxItems")
	typical := 3
	if depth > 2 {
		typical = 0
	}
	n := d.length(lo, hi, max(typical, len(prefix)))
	if n > 50 {
		defer func(s bool) { d.steady = s }(d.steady)
		d.steady = true
	}
	var parts []string
	for i := range n {
		if i < len(prefix) {
			parts = append(parts, d.value(prefix[i], depth+1))
		} else {
			parts = append(parts, d.value(s.get("items"), depth+1))
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (d *docGen) string(s *jsonNode) string {
	if f := s.get("format"); f != nil && f.kind == jsString {
		date := func() string {
			return fmt.Sprintf("%04d-%02d-%02d", []int{0, 1900, 2000, 2023, 2024, 9999}[d.r.IntN(6)], d.r.IntN(14), d.r.IntN(33))
		}
		clock := func() string {
			sec := d.r.IntN(61)
			if sec == 60 {
				d.shape = false // a leap second, which the grammar leaves out
			}
			t := fmt.Sprintf("%02d:%02d:%02d", d.r.IntN(25), d.r.IntN(61), sec)
			if d.chance(0.3) {
				t += "." + strconv.Itoa(d.r.IntN(1000))
			}
			zone := []string{"Z", "+05:30", "-23:59", "", "z", "+24:00"}[d.r.IntN(6)]
			if zone == "z" {
				d.shape = false // valid, but the grammar writes Z
			}
			return t + zone
		}
		hex := func(n int) string {
			var b strings.Builder
			for range n {
				b.WriteByte("0123456789abcdefABCDEFg"[d.r.IntN(23)])
			}
			return b.String()
		}
		switch f.s {
		case "date":
			return quoted(date())
		case "time":
			return quoted(clock())
		case "date-time":
			sep := []string{"T", "T", "t", " "}[d.r.IntN(4)]
			if sep == "t" {
				d.shape = false
			}
			return quoted(date() + sep + clock())
		case "uuid":
			return quoted(hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-" + hex(12+d.r.IntN(2)-d.r.IntN(2)))
		}
	}
	alphabet := []rune("aé😀\"\\\n/ Zb-")
	if p := s.get("pattern"); p != nil && p.kind == jsString {
		if ss := patternSamples[p.s]; len(ss) > 0 && d.chance(0.8) {
			x := ss[d.r.IntN(len(ss))]
			if d.chance(0.3) {
				x += ss[d.r.IntN(len(ss))]
			}
			return quoted(x)
		}
		alphabet = []rune(p.s + "aZ\n")
	}
	n := d.length(d.count(s, "minLength"), d.count(s, "maxLength"), 8)
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[d.r.IntN(len(alphabet))])
	}
	return quoted(b.String())
}

func (d *docGen) integer(s *jsonNode) string {
	lo, hi := -1000, 1000
	for _, k := range []string{"minimum", "exclusiveMinimum"} {
		if v := s.get(k); v != nil && v.kind == jsNumber {
			if f, err := strconv.ParseFloat(v.s, 64); err == nil {
				lo = int(f) - 3
				hi = max(hi, lo+50)
			}
		}
	}
	for _, k := range []string{"maximum", "exclusiveMaximum"} {
		if v := s.get(k); v != nil && v.kind == jsNumber {
			if f, err := strconv.ParseFloat(v.s, 64); err == nil {
				hi = int(f) + 3
				lo = min(lo, hi-50)
			}
		}
	}
	return strconv.Itoa(lo + d.r.IntN(hi-lo+1))
}

// mutate changes text a little: a character dropped, added, replaced or
// a span repeated.
func mutate(r *rand.Rand, s string) string {
	rs := []rune(s)
	pieces := []string{`"`, ",", "1", "-", "{}", "[]", "null", `"x"`, " ", "\n", ":", "0", ".5", "e3", `\`, `\u00e9`, "é", "}", "]", "true", `"a":1`}
	i := r.IntN(len(rs) + 1)
	switch r.IntN(4) {
	case 0:
		if i < len(rs) {
			return string(rs[:i]) + string(rs[i+1:])
		}
	case 1:
		return string(rs[:i]) + pieces[r.IntN(len(pieces))] + string(rs[i:])
	case 2:
		if i < len(rs) {
			return string(rs[:i]) + pieces[r.IntN(len(pieces))] + string(rs[i+1:])
		}
	}
	j := min(len(rs), i+r.IntN(6))
	return string(rs[:j]) + string(rs[i:j]) + string(rs[j:])
}

// spaced adds whitespace between tokens (outside strings), at most one
// newline and a few blanks at each place, as the grammar's ws allows.
func spaced(r *rand.Rand, s string) string {
	var b strings.Builder
	inStr, esc := false, false
	rs := []rune(s)
	for i, c := range rs {
		if i > 0 && !inStr && (strings.ContainsRune("{[,:", rs[i-1]) || strings.ContainsRune("}],:", c)) && r.IntN(3) == 0 {
			b.WriteString([]string{" ", "\n", "\n  ", "\t", "  ", "\n\t \t"}[r.IntN(6)])
		}
		b.WriteRune(c)
		switch {
		case esc:
			esc = false
		case c == '\\' && inStr:
			esc = true
		case c == '"':
			inStr = !inStr
		}
	}
	return b.String()
}

// TestFromSchemaRandomDocuments holds each grammar to the validator on
// random texts in the schema's shape and on mutations of them: what the
// grammar matches the validator must accept, and a valid text in the
// grammar's form the grammar must match.
func TestFromSchemaRandomDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	total, matched := 0, 0
	for _, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g, valid := mustSchema(t, c.schema)
			doc, err := scDecode([]byte(c.schema))
			require.NoError(t, err)
			d := &docGen{r: r, g: newSchemaGen(doc, &scShared{budget: 1 << 30, never: map[*jsonNode]bool{}, enums: map[*jsonNode][]bool{}})}
			n, mutations := 200, 6
			if strings.HasPrefix(c.name, "long") {
				n, mutations = 12, 2 // texts of a thousand characters and more
			}
			validInShape := 0
			for range n {
				d.shape = true
				text := d.value(doc, 0)
				require.True(t, utf8.ValidString(text))
				ok, m := valid(text), g.MatchString(text)
				total++
				if m {
					matched++
					require.True(t, ok, "the grammar matches %q, which the schema refuses\n%s", text, c.schema)
				}
				if ok && d.shape {
					validInShape++
					require.True(t, m, "the grammar refuses %q, valid and in the grammar's form\n%s", text, c.schema)
					sp := spaced(r, text)
					if ms := g.MatchString(sp); ms || !c.compact {
						require.True(t, ms, "the grammar refuses %q", sp)
						require.True(t, valid(sp), "%q", sp)
					}
				}
				for range mutations {
					text = mutate(r, text)
					total++
					if g.MatchString(text) {
						matched++
						require.True(t, valid(text), "the grammar matches %q, which the schema refuses\n%s", text, c.schema)
					}
				}
			}
			require.Greater(t, validInShape, n/20, "too few valid texts: the generator lost the shape")
		})
	}
	t.Logf("%d texts, %d matched", total, matched)
}

// bigNumber finds numbers of 19 digits and more, or with exponents past
// 18.
var bigNumber = regexp.MustCompile(`\d{19}|[eE]\+?0*([2-9]\d|1[89]|\d{3})`)

// FuzzFromSchema: any bytes make a grammar or a one-line error, never a
// panic; a grammar parses, and (where the schema avoids the documented
// approximations) matches only texts the validator accepts.
func FuzzFromSchema(f *testing.F) {
	for _, c := range schemaCases {
		if len(c.schema) < 2000 {
			f.Add([]byte(c.schema), c.docs[0])
		}
	}
	f.Add([]byte(`{"type":"object","properties":{"a":{"enum":[1,"x",null]},"b":{"type":"array","items":{"$ref":"#"}}}}`), `{"a":1}`)
	f.Add([]byte(`{"type":"string","pattern":"^(ab|c*)+$","minLength":0}`), `"abab"`)
	f.Add([]byte(`{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}}},{"additionalProperties":{"type":"string"}}]}`), `{"a":"x"}`)
	docs := []string{`{}`, `[]`, `null`, `true`, `0`, `-1`, `1.5`, `"a"`, `""`, `{"a":1}`, `{"a":"b"}`, `[1,2]`, `["a"]`,
		`{"a":{"b":null}}`, `"2024-01-01"`, `{"a":1,"b":[]}`, `[[]]`}
	f.Fuzz(func(t *testing.T, schema []byte, doc string) {
		text, err := FromSchema(schema)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		g, err := Parse(text)
		if err != nil {
			t.Fatalf("FromSchema(%q) made a grammar that does not parse: %v\n%s", schema, err, text)
		}
		s := string(schema)
		for _, approx := range []string{"oneOf", "minimum", "maximum", "xclusiveM", "$schema", "$id"} {
			if strings.Contains(s, approx) {
				return
			}
		}
		if bigNumber.MatchString(s) {
			return // the validator reads counts into an int64, which these overflow
		}
		valid, ok := refValidator(s, false)
		if !ok {
			return
		}
		for _, d := range append(docs, doc) {
			if len(d) < 300 && g.MatchString(d) && !valid(d) {
				t.Fatalf("the grammar of %s matches %q, which the schema refuses\n%s", schema, d, text)
			}
		}
	})
}

func ExampleFromSchema() {
	text, err := FromSchema([]byte(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name"]}`))
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(text, "\n")[:3] {
		fmt.Println(line)
	}
	g, _ := Parse(text)
	fmt.Println(g.MatchString(`{"name": "Ann", "age": 30}`), g.MatchString(`{"age": 30}`), g.MatchString(`{"name": "Ann", "age": -1}`))
	_, err = FromSchema([]byte(`{"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}}`))
	fmt.Println(err)
	// Output:
	// root-age ::= [0-9] | [1-9] [0-9]+
	// root ::= "{" ws "\"name\"" ws ":" ws string ws ( "," ws "\"age\"" ws ":" ws root-age ws )? "}"
	// value  ::= object | array | string | number | "true" | "false" | "null"
	// true false false
	// json schema: /properties/tags: unsupported keyword "uniqueItems"
}

// A $ref back to an enclosing schema, beside an enum whose values the other
// keywords filter, started filter generators without end and ran a server
// out of memory from 60 bytes of json_schema; it is refused now, in little
// memory.
func TestFromSchemaSelfRefEnumBounded(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, s := range []string{
		`{"properties":{"a":{"$ref":"#","maxLength":2}},"enum":[{}]}`,
		`{"properties":{"a":{"$ref":"#"}},"enum":[{}]}`,
	} {
		_, err := FromSchema([]byte(s))
		if err != nil {
			require.NotContains(t, err.Error(), "\n")
		}
	}
	runtime.ReadMemStats(&after)
	require.Less(t, (after.TotalAlloc-before.TotalAlloc)>>20, uint64(256))
}
