package gemini

import "github.com/ralph-dev/ralph/loop"

// Prices are the Gemini API's list prices, in US dollars per million
// tokens, for estimating the cost of a session: the Gemini CLI reports
// tokens but no cost. They are the paid tier of the Gemini Developer API
// (an API key from Google AI Studio) for prompts of up to 200k tokens, as
// listed on ai.google.dev/gemini-api/docs/pricing in late 2025 (written
// down offline, not re-checked against the page): Pro and the Gemini 3
// previews charge more per token above 200k, batch and Vertex AI prices
// differ, and a Google account login (free tier or a subscription)
// charges nothing per token. CacheRead is the context-caching price for
// cached input; CacheWrite is 0 (implicit caching charges no write, and
// the CLI reports none). Thinking tokens are billed as output.
//
// Models the pinned CLI also knows but whose prices are not listed here
// (gemini-3.1-pro-preview, gemini-3.5-flash, gemini-3.1-flash-lite, the
// Gemma models, …) get loop.CostUnknown. A caller may add or change
// entries before running sessions; the map is not guarded for concurrent
// writes.
var Prices = map[string]loop.Price{
	"gemini-2.5-pro":         {Input: 1.25, CacheRead: 0.125, Output: 10.00},
	"gemini-2.5-flash":       {Input: 0.30, CacheRead: 0.03, Output: 2.50},
	"gemini-2.5-flash-lite":  {Input: 0.10, CacheRead: 0.01, Output: 0.40},
	"gemini-2.0-flash":       {Input: 0.10, CacheRead: 0.025, Output: 0.40},
	"gemini-2.0-flash-lite":  {Input: 0.075, CacheRead: 0.075, Output: 0.30},
	"gemini-3-pro-preview":   {Input: 2.00, CacheRead: 0.20, Output: 12.00},
	"gemini-3-flash-preview": {Input: 0.50, CacheRead: 0.05, Output: 3.00},
}

// EstimateCost estimates a session's cost from its stats: per model when
// the stats have them (the CLI keys them by the model the API reported;
// routing calls to another model count too), else the whole usage at
// model's price. It returns loop.CostUnknown and 0 when a model that used
// tokens has no price, or no model named has one.
func EstimateCost(s *Stats, model string) (float64, loop.CostSource) {
	if s == nil {
		return 0, loop.CostUnknown
	}
	if len(s.Models) == 0 {
		p, ok := Prices[model]
		if !ok {
			return 0, loop.CostUnknown
		}
		return p.Cost(s.Usage()), loop.CostEstimated
	}
	var cost float64
	priced := false
	for name, m := range s.Models {
		p, ok := Prices[name]
		if !ok {
			if m.TotalTokens == 0 && m.InputTokens == 0 && m.OutputTokens == 0 {
				continue // a model that was asked and failed costs nothing
			}
			return 0, loop.CostUnknown
		}
		priced = true
		cost += p.Cost(m.Usage())
	}
	if !priced {
		return 0, loop.CostUnknown
	}
	return cost, loop.CostEstimated
}
