/** Helpers shared by this package's provider tests (not exported from the package). */

/**
 * What `chat()` answers for a plain text reply, the same whichever provider gave it: only the
 * provider's raw body differs.
 */
export function plainTextAnswer(text: string, tokens: { input: number; output: number }, raw: unknown): Record<string, unknown> {
  return {
    text,
    toolCalls: [],
    finishReason: "stop",
    usage: { inputTokens: tokens.input, outputTokens: tokens.output, totalTokens: tokens.input + tokens.output },
    message: { role: "assistant", content: text },
    raw,
  };
}
