#!/usr/bin/env python3
"""tests/serve_check.py MODE URL - the HTTP checks of tests/serve_test.sh against a running ptserve
(python3's http.client, no other package). MODE: main (every endpoint and field, streamed == plain,
n, stop, logprobs, the 400s, 20 concurrent streams, a timeout), queue (429 + Retry-After past
--max-queue), prio (a disconnect cancels and frees its blocks; a higher priority overtakes a queue), spec NAME
(--lookup / --draft: text and logprobs with drafting = with "speculative": false; the metrics count drafts).
Prints PASS/FAIL lines (the shell script counts them)."""
import http.client, json, socket, sys, threading, time, urllib.parse

MODE, URL = sys.argv[1], sys.argv[2]
U = urllib.parse.urlparse(URL)
HOST, PORT = U.hostname, U.port


def ok(cond, what, detail=""):
    print(("PASS " if cond else "FAIL ") + what + ("" if cond else ": " + str(detail)[:600]), flush=True)
    return cond


def req(method, path, body=None, timeout=60):
    c = http.client.HTTPConnection(HOST, PORT, timeout=timeout)
    c.request(method, path, body=json.dumps(body) if isinstance(body, (dict, list)) else body,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def post(path, body, timeout=60):
    st, h, data = req("POST", path, body, timeout)
    try:
        return st, h, json.loads(data)
    except Exception:
        return st, h, data


def stream(path, body):
    """the SSE events' JSON objects, and whether it ended with data: [DONE]"""
    st, h, data = req("POST", path, body)
    events, done = [], False
    for ev in data.decode().split("\n\n"):
        if not ev.strip():
            continue
        assert ev.startswith("data: "), ev
        if ev[6:] == "[DONE]":
            done = True
        else:
            events.append(json.loads(ev[6:]))
    return st, h, events, done


def metrics():
    st, h, data = req("GET", "/metrics")
    m = {}
    for line in data.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        k, v = line.rsplit(" ", 1)
        m[k] = float(v)
    return m


def main_checks():
    st, h, d = req("GET", "/health")
    ok(st == 200 and json.loads(d)["status"] == "ok", "GET /health: 200 ok", (st, d))
    st, h, d = req("GET", "/v1/models")
    j = json.loads(d)
    ok(st == 200 and j["object"] == "list" and len(j["data"]) == 1 and j["data"][0]["object"] == "model", "GET /v1/models lists the model", d)
    st, h, d = req("GET", "/")
    ok(st == 200 and b"<html" in d and b"/metrics" in d and b"http" not in d.split(b"<script>")[0].replace(b"http-equiv", b""), "GET / serves the playground page (no external assets)", d[:200])
    st, h, d = req("GET", "/nope")
    ok(st == 404 and "error" in json.loads(d), "an unknown path: 404 with an error object", (st, d))

    base = {"prompt": "the quick", "max_tokens": 24, "temperature": 0.9, "seed": 7}
    st, h, plain = post("/v1/completions", base)
    ok(st == 200 and plain["object"] == "text_completion" and plain["choices"][0]["finish_reason"] == "length"
       and plain["usage"]["completion_tokens"] == 24 and plain["usage"]["prompt_tokens"] == 9 and plain["usage"]["total_tokens"] == 33,
       "POST /v1/completions: text, finish_reason length, usage 9 + 24", plain)
    st, h, plain2 = post("/v1/completions", base)
    ok(plain2["choices"][0]["text"] == plain["choices"][0]["text"], "the same seed gives the same text", (plain, plain2))
    st, h, ev, done = stream("/v1/completions", dict(base, stream=True, stream_options={"include_usage": True}))
    text = "".join(e["choices"][0]["text"] for e in ev if e["choices"])
    ok(st == 200 and h.get("Content-Type") == "text/event-stream" and done and text == plain["choices"][0]["text"],
       "streamed text == plain text (same seed), ending data: [DONE]", (text, plain["choices"][0]["text"], done))
    ok(ev[-1]["choices"] == [] and ev[-1]["usage"] == plain["usage"] and all("usage" not in e for e in ev[:-1]),
       "stream_options.include_usage: one usage chunk last, equal to the plain response's", ev[-1])
    fins = [e["choices"][0]["finish_reason"] for e in ev if e["choices"]]
    ok(fins[-1] == "length" and all(f is None for f in fins[:-1]), "the last text chunk carries finish_reason", fins)
    st, h, ev, done = stream("/v1/completions", dict(base, stream=True))
    ok(done and all(e["choices"] for e in ev), "no usage chunk unless asked", ev[-1])

    # UTF-8: a prompt of multi-byte characters; text decodes cleanly and equals the stream
    st, h, pu = post("/v1/completions", {"prompt": "é ü ☃ the", "max_tokens": 30, "temperature": 1.5, "seed": 3})
    st2, h2, ev, done = stream("/v1/completions", {"prompt": "é ü ☃ the", "max_tokens": 30, "temperature": 1.5, "seed": 3, "stream": True})
    ok(st == 200 and "".join(e["choices"][0]["text"] for e in ev if e["choices"]) == pu["choices"][0]["text"], "a UTF-8 prompt: streamed == plain", pu)

    # chat
    msgs = [{"role": "system", "content": "a fox"}, {"role": "user", "content": "the quick"}]
    st, h, c = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 12, "seed": 1, "extra_field": [1, 2]})
    ok(st == 200 and c["object"] == "chat.completion" and c["choices"][0]["message"]["role"] == "assistant"
       and isinstance(c["choices"][0]["message"]["content"], str) and c["usage"]["prompt_tokens"] == len("a fox\nUser: the quick\nAssistant:"),
       "POST /v1/chat/completions: the template's tokens, an assistant message; unknown fields ignored", c)
    st, h, ev, done = stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 12, "seed": 1, "stream": True})
    ok(done and ev[0]["object"] == "chat.completion.chunk" and ev[0]["choices"][0]["delta"].get("role") == "assistant"
       and "".join(e["choices"][0]["delta"].get("content", "") for e in ev) == c["choices"][0]["message"]["content"],
       "chat streamed: role first, deltas == the plain content", ev[:2])

    # n, stop, logprobs
    st, h, r = post("/v1/completions", {"prompt": "the", "max_tokens": 10, "n": 3, "seed": 5, "temperature": 1.0})
    ok(st == 200 and [x["index"] for x in r["choices"]] == [0, 1, 2] and r["usage"]["completion_tokens"] == 30, "n=3: three choices, usage 30 tokens", r)
    st, h, one = post("/v1/completions", {"prompt": "the", "max_tokens": 10, "seed": 6, "temperature": 1.0})
    ok(one["choices"][0]["text"] == r["choices"][1]["text"], "choice i of n uses seed + i (choice 1 == a request with seed 6)", (one, r))
    g = plain["choices"][0]["text"]
    stop = g[3:5] if len(g) >= 5 else "o"
    st, h, s = post("/v1/completions", dict(base, stop=[stop]))
    ok(st == 200 and s["choices"][0]["finish_reason"] == "stop" and s["choices"][0]["text"] == g[:g.find(stop)],
       "a stop string ends the text before it (finish_reason stop)", (stop, g, s))
    st, h, ev, done = stream("/v1/completions", dict(base, stop=[stop], stream=True))
    ok("".join(e["choices"][0]["text"] for e in ev if e["choices"]) == s["choices"][0]["text"] and done, "a stop string, streamed: the same text", ev)
    st, h, lp = post("/v1/completions", dict(base, logprobs=1))
    L = lp["choices"][0]["logprobs"]
    ok(st == 200 and len(L["tokens"]) == 24 and len(L["token_logprobs"]) == 24 and all(x <= 0 for x in L["token_logprobs"])
       and "".join(L["tokens"]) == lp["choices"][0]["text"], "logprobs: 24 tokens whose texts join to the text, each logprob <= 0", L)
    st, h, lc = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 5, "logprobs": True})
    ok(st == 200 and len(lc["choices"][0]["logprobs"]["content"]) == 5, "chat logprobs: 5 entries", lc)

    # 400s name the field
    bad = [("/v1/completions", "{not json", "", "malformed JSON"),
           ("/v1/completions", [1, 2], "", "a body that is not an object"),
           ("/v1/completions", {"max_tokens": 3}, "prompt", "no prompt"),
           ("/v1/completions", {"prompt": "a", "max_tokens": "5"}, "max_tokens", "max_tokens a string"),
           ("/v1/completions", {"prompt": "a", "max_tokens": 0}, "max_tokens", "max_tokens 0"),
           ("/v1/completions", {"prompt": "a", "temperature": 3}, "temperature", "temperature 3"),
           ("/v1/completions", {"prompt": "a", "top_p": 0}, "top_p", "top_p 0"),
           ("/v1/completions", {"prompt": "a", "top_k": 1.5}, "top_k", "top_k 1.5"),
           ("/v1/completions", {"prompt": "a", "n": 0}, "n", "n 0"),
           ("/v1/completions", {"prompt": "a", "stop": 5}, "stop", "stop a number"),
           ("/v1/completions", {"prompt": "a", "stream": "yes"}, "stream", "stream a string"),
           ("/v1/completions", {"prompt": "a", "seed": "1"}, "seed", "seed a string"),
           ("/v1/completions", {"prompt": "a", "priority": 9}, "priority", "priority 9"),
           ("/v1/completions", {"prompt": "a", "logprobs": 9}, "logprobs", "logprobs 9"),
           ("/v1/completions", {"prompt": "a", "stream_options": {"include_usage": 1}}, "stream_options.include_usage", "include_usage a number"),
           ("/v1/completions", {"prompt": "x" * 5000}, "prompt", "a prompt over the context"),
           ("/v1/chat/completions", {"messages": "hi"}, "messages", "messages a string"),
           ("/v1/chat/completions", {"messages": [{"role": "bot", "content": "x"}]}, "messages", "an unknown role")]
    for path, body, field, what in bad:
        st, h, d = post(path, body)
        e = d.get("error", {}) if isinstance(d, dict) else {}
        ok(st == 400 and e.get("type") == "invalid_request_error" and (e.get("param") or "") == field and e.get("message"),
           "400 for %s, naming %s" % (what, field or "no field"), (st, d))

    # 20 concurrent streaming clients with correct usage counts
    res = [None] * 20

    def client(i):
        try:
            res[i] = stream("/v1/completions", {"prompt": "the lazy dog %d" % i, "max_tokens": 5 + i, "seed": i, "stream": True,
                                                "stream_options": {"include_usage": True}})
        except Exception as e:
            res[i] = e
    th = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    [t.start() for t in th]
    [t.join() for t in th]
    good = [i for i in range(20) if not isinstance(res[i], Exception) and res[i][3] and res[i][2][-1]["usage"]["completion_tokens"] == 5 + i
            and sum(1 for e in res[i][2] if e["choices"] and e["choices"][0]["text"]) <= 5 + i]
    ok(len(good) == 20, "20 concurrent streaming clients finish, each with its usage (5 + i tokens)", [r for r in res if r is None or isinstance(r, Exception)][:2] or len(good))

    # a timeout
    st, h, d = post("/v1/completions", {"prompt": "the quick", "max_tokens": 50, "timeout": 0.000001})
    ok(st == 408 and d["error"]["param"] == "timeout", "a request past its timeout: 408 naming timeout", (st, d))
    m = metrics()
    ok(m.get('ptserve_requests_total{result="timeout"}', 0) >= 1, "/metrics counts the timeout", m)
    need = ["ptserve_requests_running", "ptserve_requests_waiting", 'ptserve_kv_blocks{state="used"}', 'ptserve_kv_blocks{state="cached"}',
            "ptserve_prefix_cache_hit_tokens_total", "ptserve_prompt_tokens_total", "ptserve_generation_tokens_total",
            "ptserve_time_to_first_token_seconds_count", 'ptserve_inter_token_latency_seconds_bucket{le="+Inf"}']
    ok(all(k in m for k in need) and m["ptserve_generation_tokens_total"] > 300 and m["ptserve_time_to_first_token_seconds_count"] >= 30
       and m['ptserve_kv_blocks{state="used"}'] == 0 and m["ptserve_prefix_cache_hit_tokens_total"] > 0,
       "/metrics parses: every series, tokens out, TTFT count, no block in use when idle, prefix-cache hits from repeated prompts",
       {k: m.get(k) for k in need})
    ok(m.get("ptserve_engine_requests_held", -1) == 0,
       "after 30+ requests the engine holds none: each is released once answered (memory stays flat)", m.get("ptserve_engine_requests_held"))


def queue_checks():
    res = []
    lock = threading.Lock()

    def client(i):
        st, h, d = post("/v1/completions", {"prompt": "the quick brown", "max_tokens": 40, "seed": i})
        with lock:
            res.append((st, h.get("Retry-After"), d))
    th = [threading.Thread(target=client, args=(i,)) for i in range(24)]
    [t.start() for t in th]
    [t.join() for t in th]
    n429 = [r for r in res if r[0] == 429]
    n200 = [r for r in res if r[0] == 200]
    ok(len(n429) > 0 and len(n200) >= 3 and len(n429) + len(n200) == 24, "past --max-queue: 429s, the rest served (%d x 200, %d x 429)" % (len(n200), len(n429)),
       [r[:2] for r in res])
    ok(all(r[1] and int(r[1]) >= 1 and r[2]["error"]["type"] == "rate_limit_error" for r in n429), "each 429 has Retry-After and a rate_limit_error", n429[:1])


def prio_checks():
    # a disconnect: the request is cancelled, its blocks come back
    c0 = metrics().get('ptserve_requests_total{result="cancelled"}', 0)
    s = socket.create_connection((HOST, PORT))
    body = json.dumps({"prompt": "the quick brown fox", "max_tokens": 2000, "stream": True, "temperature": 1.0}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    first = s.recv(4096)
    used_running = metrics()['ptserve_kv_blocks{state="used"}']
    s.close()
    t0 = time.time()
    m = metrics()
    while time.time() - t0 < 10 and (m.get('ptserve_requests_total{result="cancelled"}', 0) == c0 or m['ptserve_kv_blocks{state="used"}'] > 0):
        time.sleep(0.05)
        m = metrics()
    ok(first.startswith(b"HTTP/1.1 200") and m.get('ptserve_requests_total{result="cancelled"}', 0) == c0 + 1 and m['ptserve_kv_blocks{state="used"}'] == 0
       and m["ptserve_requests_running"] == 0, "a client that disconnects: its request cancelled, its blocks back (used %d while it ran, %d after)"
       % (used_running, m['ptserve_kv_blocks{state="used"}']), m)
    # priorities: with one sequence, a queue of low-priority requests, then a high one: it overtakes them
    done = {}
    lock = threading.Lock()

    def client(name, prio, delay):
        time.sleep(delay)
        st, h, d = post("/v1/completions", {"prompt": "the quick", "max_tokens": 50, "priority": prio, "seed": 1})
        with lock:
            done[name] = (time.time(), st)
    th = [threading.Thread(target=client, args=("low%d" % i, 0, 0.0)) for i in range(6)] + [threading.Thread(target=client, args=("high", 7, 0.05))]
    [t.start() for t in th]
    [t.join() for t in th]
    later = [k for k in done if k != "high" and done[k][0] > done["high"][0]]
    ok(all(v[1] == 200 for v in done.values()) and len(later) >= 3, "priority 7 overtakes queued priority-0 requests (%d of 6 finished after it)" % len(later),
       sorted(done.items(), key=lambda kv: kv[1][0]))


def spec_checks():
    """a server with --lookup or --draft: each request's text and logprobs with drafting equal those of the same request
    with "speculative": false (greedy and sampled, streamed too); the drafted tokens counted in /metrics"""
    name = sys.argv[3] if len(sys.argv) > 3 else "spec"
    for temp in (0, 0.9):
        base = {"prompt": "dog 7 times.\nthe quick", "max_tokens": 40, "temperature": temp,
                "seed": 3, "logprobs": 1}
        st0, h, a = post("/v1/completions", dict(base, speculative=False))
        st1, h, b = post("/v1/completions", base)
        st2, h, ev, done = stream("/v1/completions", dict(base, stream=True))
        sa = "".join(e["choices"][0]["text"] for e in ev if e.get("choices"))
        same = st0 == st1 == st2 == 200 and a["choices"][0]["text"] == b["choices"][0]["text"] == sa and \
            a["choices"][0]["logprobs"]["token_logprobs"] == b["choices"][0]["logprobs"]["token_logprobs"]
        ok(same, "%s, temperature %g: text and logprobs with drafting = with \"speculative\": false (streamed too)" % (name, temp),
           (st0, st1, st2, a, b, sa))
    m = metrics()
    ok(m.get("ptserve_spec_drafted_tokens_total", 0) > 0 and "ptserve_spec_accepted_tokens_total" in m,
       "%s: /metrics counts the drafted tokens (%d, %d accepted)" % (name, m.get("ptserve_spec_drafted_tokens_total", 0),
                                                                   m.get("ptserve_spec_accepted_tokens_total", 0)), m)
    st, h, e = post("/v1/completions", {"prompt": "a", "speculative": "yes"})
    ok(st == 400 and e["error"]["param"] == "speculative", "%s: \"speculative\": \"yes\" is a 400 naming the field" % name, (st, e))


{"main": main_checks, "queue": queue_checks, "prio": prio_checks, "spec": spec_checks}[MODE]()
