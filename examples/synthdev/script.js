/** Handlers of the pair_programming workflow; they run in Baton's QuickJS sandbox. */

export function startRound() {
    this.common_data.round = (this.common_data.round || 0) + 1;
}

export function keepCode() {
    this.common_data.code = this.last_response.choices[0].message.content;
}

/** The reviewer answers through the parsing-only `verdict` tool: its arguments are the decision. */
export function readVerdict() {
    const calls = this.last_response.choices[0].message.tool_calls || [];
    const verdict = calls.find((c) => c.function.name === 'verdict');
    this.common_data.approved = verdict ? JSON.parse(verdict.function.arguments).approved === true : false;
    if (!this.common_data.approved) {
        this.context.getContext('session').addMessage({ role: 'user', content: 'Reviewer asks for changes.' });
    }
}

export function decide() {
    if (this.common_data.approved) return 'stop';
    return this.common_data.round >= this.common_data.max_rounds ? 'stop' : 'start';
}

export function onError() {
    return 'retry';
}

export function finish() {
    this.common_data.result = { code: this.common_data.code, approved: this.common_data.approved, rounds: this.common_data.round };
}
