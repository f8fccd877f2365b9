package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Falcon's tokenizer.json splits after ByteLevel, on the byte-level text:
// Digits cuts between numbers and the rest (a byte whose character is "²",
// "³", "¹", "¼", "½" or "¾" is a number), then [0-9][0-9][0-9] isolates
// triples. hf_ref_test.go checks the same against Hugging Face's tokenizers;
// these cases need no node.
func TestFalconByteDigits(t *testing.T) {
	var numeric []byte
	for b := range 256 {
		if numericByte[b] {
			numeric = append(numeric, byte(b))
		}
	}
	assert.Equal(t, []byte("0123456789\xb2\xb3\xb9\xbc\xbd\xbe"), numeric)

	falcon, err := lookupPre("falcon")
	assert.NoError(t, err)
	for _, c := range []struct {
		text string
		want []string
	}{
		{" 12", []string{" ", "12"}},
		{" 1234", []string{" ", "123", "4"}},
		{"12345", []string{"123", "45"}},
		{"ab 1234567 cd", []string{"ab", " ", "123", "456", "7", " cd"}},
		{"ü", []string{"\xc3", "\xbc"}},                // C3 BC: "Ã", "¼"
		{"½12", []string{"\xc2", "\xbd12"}},            // C2 BD: "Â", "½12"
		{"ò123", []string{"\xc3", "\xb2", "123"}},      // C3 B2: "Ã", "²", then a triple
		{"é 3.14", []string{"é", " ", "3", ".", "14"}}, // "." is punctuation, split first
		{"x²", []string{"x", "\xc2", "\xb2"}},
		{"٣", []string{"٣"}}, // D9 A3: neither byte is a number
	} {
		assert.Equal(t, c.want, falcon.split(c.text), "%q", c.text)
	}
}
