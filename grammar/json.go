package grammar

// JSON's grammar (RFC 8259) in GBNF, for llama-server's
// response_format {"type": "json_object"} and ollama's format "json":
// root is an object. Between tokens it allows at most one newline and
// twenty blanks, so that a model cannot run on in whitespace for ever.
var JSON = jsonGrammar(`root ::= object`, `ws ::= ([ \t\n] [ \t]{0,20})?`)

// jsonValue is any JSON text, whitespace as RFC 8259 allows it: what
// encoding/json.Valid takes (the tests hold one to the other).
var jsonValue = jsonGrammar(`root ::= ws value ws`, `ws ::= [ \t\n\r]*`)

// JSONRules are the rules of JSON's values (value, object, array, string,
// number and the rules under them) for grammars that build on them, which
// define ws, the whitespace they allow between tokens.
const JSONRules = `
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex    ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
`

func jsonGrammar(root, ws string) string { return root + "\n" + JSONRules + ws + "\n" }
