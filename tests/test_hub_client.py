"""The hub client (attnstruct.hub_client.client) against the stand-in hub's redirects, faults and misbehaviour: the
bytes come right, the waits are the ones the hub asks for or the policy's backoff, the bounds hold (attempts, waits,
each attempt's deadline, the bytes read). Waits are recorded, not slept; a deadline costs a fraction of a second."""

import random
import threading
import time
from email.utils import formatdate

import httpx2
import pytest
from huggingface_hub import constants, hf_hub_url
from standin_hub import SparseFile, StandinHub

from attnstruct.hub_client import client as hub_client
from attnstruct.hub_client import links as hub_links
from attnstruct.hub_client import quota as hub_quota
from attnstruct.hub_client.client import (
    REASONS,
    CallCounter,
    RetryCounter,
    RetryPolicy,
    get_file,
    get_json,
    get_json_pages,
    get_range,
)
from attnstruct.hub_client.failures import HubError
from attnstruct.hub_client.retry import retry_after_s
from attnstruct.hub_client.stream import Progress, read_range

pytestmark = pytest.mark.hub

REPO = "org/tiny"
DATA = bytes((i * 7 + i // 256) % 256 for i in range(10_000))
CONFIG = b'{"model_type": "gpt2"}'


@pytest.fixture(autouse=True)
def _online_without_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def hub(loopback_http):
    with StandinHub() as h:
        yield h


class Waits(list):
    """Waits recorded, not slept, and a fake monotonic clock that each of them moves on (the pacer's)."""

    def __init__(self):
        super().__init__()
        self.now = 1000.0

    def append(self, seconds):
        super().append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def waits():
    return Waits()


@pytest.fixture(autouse=True)
def pacer(waits, monkeypatch):
    """A pacer of this test's own, on the fake clock of its waits."""
    fresh = hub_quota.Pacer(clock=waits)
    monkeypatch.setattr(hub_quota, "PACER", fresh)
    return fresh


@pytest.fixture(autouse=True)
def links(monkeypatch):
    """A signed-link cache of this test's own."""
    fresh = hub_links.LinkCache()
    monkeypatch.setattr(hub_links, "LINKS", fresh)
    return fresh


@pytest.fixture
def policy(waits):
    """The default bounds, a seeded jitter, and waits recorded instead of slept."""
    return RetryPolicy(rng=random.Random(7), sleep=waits.append)


@pytest.fixture
def counter():
    return RetryCounter()


def _url(hub, commit, file="model.safetensors", repo=REPO):
    return hf_hub_url(repo, file, revision=commit, endpoint=hub.url)


def _draws(seed, n, policy):
    """The backoff waits a fresh ``random.Random(seed)`` gives for retries 0..n-1 under ``policy``'s base and cap."""
    rng = random.Random(seed)
    return [rng.uniform(0.0, min(policy.cap_s, policy.base_s * 2.0**i)) for i in range(n)]


def test_a_redirect_to_the_cdn_keeps_the_range_and_leaves_the_token_on_the_hub(hub, policy, counter):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA}, gated_token="hf_right")
    hub.redirect_large()
    url = _url(hub, commit)
    assert get_range(url, 100, 300, token="hf_right", policy=policy, counter=counter) == DATA[100:300]
    path = f"/{REPO}/resolve/{commit}/model.safetensors"
    assert hub.requests == [("GET", path, "bytes=100-299")] and hub.statuses == [302]  # 302: the token was right
    assert hub.cdn_requests == [("GET", f"/cdn/{REPO}/{commit}/model.safetensors", "bytes=100-299", False)]
    with pytest.raises(HubError) as err:
        get_range(url, 0, 8, token="hf_wrong", policy=policy, counter=counter)
    assert err.value.kind == "gated" and len(hub.requests) == 2  # a 403 is not retried
    assert counter.summary() == "hub: no retries"


def test_a_relative_redirect_on_the_hub_keeps_the_token(hub, policy, counter):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA}, gated_token="hf_right")
    hub.redirect_repo("org/old", REPO)
    assert get_range(_url(hub, commit, repo="org/old"), 8, 16, token="hf_right", policy=policy) == DATA[8:16]
    assert [p for _, p, _ in hub.requests] == [f"/{r}/resolve/{commit}/model.safetensors" for r in ("org/old", REPO)]
    assert [r for _, _, r in hub.requests] == ["bytes=8-15"] * 2 and hub.statuses == [307, 206]


@pytest.mark.parametrize("redirect", [False, True])
def test_429_with_retry_after_is_waited_out_and_every_read_is_right(hub, policy, counter, waits, redirect, links):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    if redirect:
        hub.redirect_large()
    hub.rate_limit(every=3, retry_after=2)
    for start in range(0, 10_000, 1000):
        links.clear()  # every read resolves
        assert (
            get_range(_url(hub, commit), start, start + 700, token=False, policy=policy, counter=counter)
            == (DATA[start : start + 700])
        )
    refused = hub.statuses.count(429)
    assert refused >= 3 and waits == [2.0] * refused
    assert counter.retries == {**dict.fromkeys(REASONS, 0), "rate limited": refused}
    assert counter.summary() == f"hub: {refused} retries ({refused} rate limited), {2.0 * refused:.1f} s waited"


def test_retry_after_as_an_http_date_and_the_ratelimit_reset_and_a_second_are_honoured(hub, policy, waits):
    url = _url(hub, hub.add_repo(REPO, {"model.safetensors": DATA}))
    hub.rate_limit(every=2, retry_after=formatdate(time.time() + 30, usegmt=True))
    assert [get_range(url, 0, 8, token=False, policy=policy) for _ in range(2)] == [DATA[:8]] * 2
    hub.rate_limit(every=2, reset=12)
    assert [get_range(url, 0, 8, token=False, policy=policy) for _ in range(2)] == [DATA[:8]] * 2
    assert hub.statuses == [206, 429, 206, 206, 429, 206]
    assert len(waits) == 2 and 27 < waits[0] <= 30 and waits[1] == 13.0  # t is whole seconds: the reset may be later


def test_without_retry_after_the_waits_are_full_jitter_backoff_of_a_second_or_more_bounded_by_the_total(
    hub, waits, counter
):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.rate_limit(every=1)
    policy = RetryPolicy(rng=random.Random(3), sleep=waits.append, cap_s=3.0, total_wait_s=20.0)
    with pytest.raises(HubError) as err:
        get_range(
            _url(hub, commit), 0, 8, token=False, what="org/tiny/model.safetensors", policy=policy, counter=counter
        )
    assert (
        err.value.kind == "rate limited"
        and "\n" not in str(err.value)
        and "org/tiny/model.safetensors" in str(err.value)
    )
    expected, draws = [], iter(_draws(3, 100, policy))
    while sum(expected) + (wait := max(1.0, next(draws))) <= 20.0:
        expected.append(wait)
    assert waits == expected and len(expected) > policy.failures  # more than the retries of other failures
    assert len(hub.requests) == len(expected) + 1 and counter.retries["rate limited"] == len(expected)
    assert all(1 <= w < 3 for w in waits) and counter.waited_s == pytest.approx(sum(waits))


def test_a_wait_that_would_pass_the_total_bound_is_not_begun(hub, policy, waits):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.rate_limit(every=1, retry_after=120)
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit), 0, 8, token=False, policy=policy)
    assert err.value.kind == "rate limited" and "would pass 660 s" in str(err.value)
    assert waits == [120.0] * 5 and len(hub.requests) == 6
    hub.rate_limit(every=1, retry_after=1000)
    with pytest.raises(HubError, match="rate limited"):
        get_range(_url(hub, commit), 0, 8, token=False, policy=policy)
    assert waits == [120.0] * 5 and len(hub.requests) == 7


@pytest.mark.parametrize("redirect", [False, True])
def test_a_server_error_once_and_a_broken_transfer_once_are_survived(hub, policy, counter, waits, redirect):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    if redirect:
        hub.redirect_large()
    hub.fail_once("model.safetensors", 503)
    hub.break_once("model.safetensors")
    assert get_range(_url(hub, commit), 1000, 5000, token=False, policy=policy, counter=counter) == DATA[1000:5000]
    assert [fault for fault, _ in hub.faults] == ["failed", "broken"]
    assert (counter.retries["server error"], counter.retries["broken transfer"]) == (1, 1)
    assert waits == _draws(7, 2, policy)
    assert counter.summary() == f"hub: 2 retries (1 server error, 1 broken transfer), {sum(waits):.1f} s waited"


def test_a_timeout_is_retried(hub, waits, counter):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.stall_once("model.safetensors", 2.0)
    policy = RetryPolicy(sleep=waits.append, timeout_s=0.5)  # the retry's answer comes in time on a loaded machine
    assert get_range(_url(hub, commit), 0, 100, token=False, policy=policy, counter=counter) == DATA[:100]
    assert counter.retries["timeout"] == 1 and len(waits) == 1 and hub.faults[0][0] == "stalled"


def test_failures_that_do_not_pass_give_up_after_a_few_attempts(hub, policy, counter):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA, "w.bin": DATA})
    for _ in range(10):
        hub.fail_once("model.safetensors", 503)
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit), 0, 8, token=False, policy=policy, counter=counter)
    assert err.value.kind == "error" and "HTTP 503" in str(err.value) and "4 attempts" in str(err.value)
    assert len(hub.requests) == 1 + policy.failures == 4
    hub.truncate(REPO, "w.bin", keep=10)
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit, "w.bin"), 0, 100, token=False, policy=policy, counter=counter)
    assert err.value.kind == "truncated" and "\n" not in str(err.value) and len(hub.requests) == 8
    assert (counter.retries["server error"], counter.retries["broken transfer"]) == (3, 3)


def test_a_failed_request_raises_the_hubs_own_error_not_a_checkpoint_error(hub, policy):
    from attnstruct.checkpoints.extract.blocks import ExtractionError

    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit, "missing.safetensors"), 0, 8, token=False, policy=policy)
    assert err.value.kind == "not found" and not isinstance(err.value, ExtractionError)


def test_a_file_that_ends_early_and_other_4xx_are_not_retried(hub, policy, counter, waits):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit), 9_990, 10_010, token=False, policy=policy, counter=counter)
    assert err.value.kind == "truncated" and "sent 10 of the 20 bytes" in str(err.value)
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit, "missing.safetensors"), 0, 8, token=False, policy=policy, counter=counter)
    assert err.value.kind == "not found"
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit), 20_000, 20_008, token=False, policy=policy, counter=counter)  # 416
    assert err.value.kind == "error" and "416" in str(err.value)
    assert hub.statuses == [206, 404, 416] and waits == [] and counter.summary() == "hub: no retries"
    assert get_range(_url(hub, commit), 5, 5, token=False, policy=policy) == b"" and len(hub.requests) == 3


def test_the_counter_sums_over_threads_and_reads_in_one_line():
    counter = RetryCounter()
    assert counter.summary() == "hub: no retries"
    counter.add("timeout", 0.25)
    assert counter.summary() == "hub: 1 retry (1 timeout), 0.2 s waited"

    def add():
        for _ in range(1000):
            counter.add("rate limited", 0.5)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.retries["rate limited"] == 4000 and counter.waited_s == pytest.approx(2000.25)
    assert counter.summary() == "hub: 4001 retries (4000 rate limited, 1 timeout), 2000.2 s waited"
    counter.reset()
    assert counter.summary() == "hub: no retries" and counter.waited_s == 0
    with pytest.raises(ValueError):
        RetryPolicy(failures=-1)


def test_a_200_to_a_range_request_is_read_up_to_the_end_of_the_range_and_no_further(hub, policy, counter):
    big = SparseFile(1 << 30, {0: DATA})
    commit = hub.add_repo(REPO, {"model.safetensors": DATA, "big.safetensors": big})
    hub.ignore_ranges()
    assert get_range(_url(hub, commit), 100, 200, token=False, policy=policy, counter=counter) == DATA[100:200]
    assert get_range(_url(hub, commit, "big.safetensors"), 10, 18, token=False, policy=policy) == DATA[10:18]
    assert hub.statuses == [200, 200] and hub.bytes_served_for(REPO, "big.safetensors") < 64 << 20  # of 1 GiB
    with pytest.raises(HubError, match="truncated: .* sent 0 of the 10 bytes asked for at offset 10000"):
        get_range(_url(hub, commit), 10_000, 10_010, token=False, policy=policy, counter=counter)
    assert counter.summary() == "hub: no retries"


def test_a_200_to_a_range_request_is_refused_before_its_body_when_too_much_would_come_before_the_range(hub, policy):
    big = SparseFile(1 << 30, {0: DATA})
    commit = hub.add_repo(REPO, {"big.safetensors": big})
    hub.ignore_ranges()
    url = _url(hub, commit, "big.safetensors")
    assert get_range(url, 10, 18, token=False, policy=policy, most_skipped=10) == DATA[10:18]
    with pytest.raises(HubError, match="with the whole file .HTTP 200.: 11 bytes would come before them"):
        get_range(url, 11, 18, token=False, policy=policy, most_skipped=10)
    assert hub.statuses == [200, 200] and hub.bytes_served_for(REPO) < 64 << 20  # of 2 GiB asked for


def test_the_pages_of_a_listing_come_one_after_another_each_named_by_the_last(hub, policy, monkeypatch):
    names = [f"data/part-{i:03d}.jsonl" for i in range(7)]
    hub.add_dataset("org/set", dict.fromkeys(names, b"{}\n"))
    hub.tree_page_size = 3
    url = f"{hub.url}/api/datasets/org/set/tree/main?recursive=true"
    pages = list(get_json_pages(url, token="hf_right", what="org/set", policy=policy))
    assert [entry["path"] for page in pages for entry in page] == ["data", *names] and len(pages) == 3
    monkeypatch.setattr(hub_client, "MAX_PAGES", 2)
    with pytest.raises(HubError, match="the hub's listing of org/set goes on past 2 pages"):
        list(get_json_pages(url, token="hf_right", what="org/set", policy=policy))
    assert sum("/tree/" in path for _, path, _ in hub.requests) == 5


def test_a_next_page_on_another_origin_is_not_asked_for(hub, policy):
    hub.add_dataset("org/set", {f"part-{i}.jsonl": b"{}\n" for i in range(5)})
    hub.tree_page_size = 3
    hub.mislink_tree(origin=hub.cdn_url)
    pages = get_json_pages(f"{hub.url}/api/datasets/org/set/tree/main", token="hf_right", what="s", policy=policy)
    assert len(next(pages)) == 3
    with pytest.raises(HubError, match=f"the hub's listing of s names its next page on {hub.cdn_url}, another"):
        next(pages)
    assert hub.cdn_requests == []


def test_a_206_that_is_not_the_range_asked_for_or_is_encoded_is_refused():
    def answer(status, headers):
        return httpx2.Response(status, headers=headers, stream=httpx2.ByteStream(DATA[:10]))

    gzipped = {"Content-Range": "bytes 0-9/10000", "Content-Encoding": "gzip"}
    with pytest.raises(HubError, match="answered bytes 10-19 of f with Content-Range 'bytes 0-9/10000'"):
        read_range(answer(206, {"Content-Range": "bytes 0-9/10000"}), 10, 20, "f", Progress())
    with pytest.raises(HubError, match="Content-Range None"):
        read_range(answer(206, {}), 0, 10, "f", Progress())
    with pytest.raises(HubError, match="gzip-encoded"):
        read_range(answer(206, gzipped), 0, 10, "f", Progress())
    assert read_range(answer(206, {"Content-Range": "bytes 0-9/10000"}), 0, 4, "f", Progress()) == DATA[:4]


def test_a_trickling_answer_is_given_up_at_its_deadline_and_counted_as_a_timeout(hub, waits, counter):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.trickle(0.1, "model.safetensors")
    policy = RetryPolicy(sleep=waits.append, timeout_s=0.3, min_rate=1000)
    began = time.monotonic()
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit), 0, 1000, token=False, policy=policy, counter=counter)
    assert "slower than 1000 bytes/s" in str(err.value) and "4 attempts" in str(err.value)
    assert counter.retries["timeout"] == policy.failures == 3 and time.monotonic() - began < 4 * 0.5 + 1


def test_a_slow_answer_that_keeps_the_minimum_rate_is_waited_for(hub, waits, counter):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.trickle(0.01, "model.safetensors")  # 100 bytes/s: 60 bytes take 0.6 s, twice the 0.3 s of the timeout
    policy = RetryPolicy(sleep=waits.append, timeout_s=0.3, min_rate=25)
    assert get_range(_url(hub, commit), 0, 60, token=False, policy=policy, counter=counter) == DATA[:60]
    assert counter.summary() == "hub: no retries"


def test_headers_that_trickle_are_given_up_too(hub, waits, counter):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.trickle(0.05, "model.safetensors", headers=True)  # each read of the client gets a byte in time
    policy = RetryPolicy(sleep=waits.append, timeout_s=0.3, failures=0)
    began = time.monotonic()
    with pytest.raises(HubError, match="no answer within 0.3 s"):
        get_range(_url(hub, commit), 0, 8, token=False, policy=policy, counter=counter)
    assert time.monotonic() - began < 1.5


def test_a_whole_file_comes_into_its_path_with_the_size_listed_or_nothing_is_left(hub, policy, counter, tmp_path):
    commit = hub.add_repo(REPO, {"config.json": CONFIG})
    url = _url(hub, commit, "config.json")
    path = tmp_path / "files" / "config.json"
    assert get_file(url, path, token=False, what="c", size=len(CONFIG), policy=policy) == path
    assert path.read_bytes() == CONFIG
    with pytest.raises(HubError, match="more than 5 bytes of c, the size the hub lists"):
        get_file(url, tmp_path / "short" / "config.json", token=False, what="c", size=5, policy=policy)
    with pytest.raises(HubError, match=f"truncated: the hub sent {len(CONFIG)} of the 1000 bytes of c"):
        get_file(url, tmp_path / "short" / "config.json", token=False, what="c", size=1000, policy=policy)
    assert list((tmp_path / "short").iterdir()) == []


def test_a_whole_file_on_a_full_disk_is_the_one_writers_error_and_leaves_nothing(hub, policy, tmp_path):
    from attnstruct.results import OutputError

    from hostile import full_disk

    commit = hub.add_repo(REPO, {"config.json": CONFIG * 4096})
    with full_disk(tmp_path / "disk", size_kib=64) as disk:
        with pytest.raises(OutputError, match="No space left on device"):
            get_file(_url(hub, commit, "config.json"), disk / "config.json", token=False, what="c", policy=policy)
        assert [p.name for p in disk.iterdir()] == [".filler"]


def test_a_whole_file_rate_limited_for_longer_than_the_bound_is_not_waited_for(hub, policy, counter, waits, tmp_path):
    commit = hub.add_repo(REPO, {"config.json": CONFIG})
    hub.rate_limit(every=1, retry_after=999_999)
    with pytest.raises(HubError) as err:
        get_file(_url(hub, commit, "config.json"), tmp_path / "c.json", token=False, what="c", policy=policy)
    assert err.value.kind == "rate limited" and "999999.0 s, would pass 660 s" in str(err.value)
    assert waits == [] and len(hub.requests) == 1 and not (tmp_path / "c.json").exists()


def test_an_api_answer_that_is_not_json_is_one_line(hub, policy):
    commit = hub.add_repo(REPO, {"config.json": b"{not json"})
    with pytest.raises(HubError, match="the hub's answer for c is not JSON"):
        get_json(_url(hub, commit, "config.json"), token=False, what="c", policy=policy)
    assert get_json(f"{hub.url}/api/models/{REPO}", token=False, what="i", policy=policy)["sha"] == commit


def test_a_retry_after_that_is_not_ascii_digits_is_not_a_number_of_seconds():
    assert retry_after_s({"Retry-After": "\xb2"}) is None and retry_after_s({"Retry-After": " 7 "}) == 7.0


# -- few requests: signed links kept, every hop counted ---------------------------------------------------------------


def test_a_signed_link_is_used_again_without_resolving_and_every_hop_is_counted(hub, policy, monkeypatch):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA}, gated_token="hf_right")
    hub.redirect_large()
    calls, process = CallCounter(), CallCounter()
    monkeypatch.setattr(hub_client, "DEFAULT_CALLS", process)
    for start in (0, 100, 200):
        got = get_range(_url(hub, commit), start, start + 50, token="hf_right", policy=policy, calls=calls)
        assert got == DATA[start : start + 50]
    assert len(hub.requests) == 1 and [auth for *_, auth in hub.cdn_requests] == [False] * 3
    assert calls.summary() == process.summary() == "hub calls: 1 resolver, 0 API, 3 CDN"


def test_a_kept_link_the_cdn_refuses_is_resolved_again_once_at_no_retry_cost(hub, policy, counter, waits):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.redirect_large()
    assert get_range(_url(hub, commit), 0, 8, token=False, policy=policy, counter=counter) == DATA[:8]
    hub.fail_once("/cdn/", 403)  # the link expired early
    assert get_range(_url(hub, commit), 8, 16, token=False, policy=policy, counter=counter) == DATA[8:16]
    assert len(hub.requests) == 2 and len(hub.cdn_requests) == 3
    assert counter.summary() == "hub: no retries" and waits == []


def test_a_416_that_disagrees_with_the_files_listed_size_is_retried_and_one_that_agrees_is_one_line(
    hub, policy, counter
):
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.fail_once("model.safetensors", 416)  # no Content-Range of the file's size: not the file's answer
    got = get_range(_url(hub, commit), 0, 8, token=False, size=len(DATA), policy=policy, counter=counter)
    assert got == DATA[:8] and counter.retries["server error"] == 1
    with pytest.raises(HubError) as err:
        get_range(_url(hub, commit), 20_000, 20_008, token=False, size=len(DATA), policy=policy, counter=counter)
    assert "bytes=20000-20007 of /org/tiny/resolve/" in str(err.value) and "outside its 10000 bytes (HTTP 416)" in str(
        err.value
    )
    assert hub.statuses == [416, 206, 416] and counter.retries["server error"] == 1


def test_a_range_readers_requests_are_counted_in_its_calls_and_know_its_files_sizes(hub, policy, tmp_path, monkeypatch):
    from attnstruct.checkpoints.remote_safetensors import RangeReader

    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    monkeypatch.setattr(hub_client, "DEFAULT_POLICY", policy)
    reader = RangeReader(
        REPO, commit, endpoint=hub.url, token=None, cache=tmp_path, offline=False, sizes={"model.safetensors": 10_000}
    )
    hub.fail_once("model.safetensors", 416)
    assert reader.read("model.safetensors", 0, 8) == DATA[:8]  # the 416 retried: the size was known
    assert reader.calls.calls == {"resolvers": 2, "api": 0, "cdn": 0}


def test_a_refused_token_is_named_by_where_it_came_from_and_never_printed(monkeypatch):
    from attnstruct.hub_client.stream import token_refused

    monkeypatch.setenv("HF_TOKEN", "hf_stale_secret")
    from_env = token_refused("hf_stale_secret")
    assert from_env.kind == "invalid token" and "from HF_TOKEN" in str(from_env) and "unset HF_TOKEN" in str(from_env)
    monkeypatch.delenv("HF_TOKEN")
    saved = token_refused("hf_saved_secret")
    assert "from the saved login" in str(saved) and "`hf auth logout`" in str(saved)
    assert all("secret" not in str(err) and "\n" not in str(err) for err in (from_env, saved))


# -- every call bounded, listings too ---------------------------------------------------------------------------------


@pytest.fixture
def short_timeouts(waits, monkeypatch):
    """The default policy with a 0.3 s deadline per attempt and one retry of a failure."""
    policy = RetryPolicy(sleep=waits.append, timeout_s=0.3, failures=1)
    monkeypatch.setattr(hub_client, "DEFAULT_POLICY", policy)
    return policy


def test_a_stalled_refs_listing_ends_attnstruct_revisions_in_a_bounded_time(hub, short_timeouts, monkeypatch, capsys):
    from attnstruct import cli

    hub.add_repo(REPO, {"config.json": CONFIG}, revision="step1")
    for _ in range(4):
        hub.stall_once("/refs", 30)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    began = time.monotonic()
    status, err = cli.main(["revisions", REPO]), capsys.readouterr().err
    assert status == 2 and "no answer within 0.3 s" in err and err.count("\n") == 1
    assert time.monotonic() - began < 10  # four stalls of 30 s: 120 s without the attempts' deadlines


def test_a_stalled_tree_listing_ends_in_a_bounded_time(hub, short_timeouts, tmp_path):
    from attnstruct.checkpoints.hub import HubSettings
    from attnstruct.tasks.data_files import CorpusError
    from attnstruct.tasks.hub_datasets import fetch_listing

    hub.add_dataset("org/set", {"part-0.jsonl": b"{}\n"})
    for _ in range(4):
        hub.stall_once("/tree/", 30)
    settings = HubSettings(endpoint=hub.url, token=None, hub_cache=tmp_path, range_cache=tmp_path, offline=False)
    began = time.monotonic()
    with pytest.raises(CorpusError, match="no answer within 0.3 s"):
        fetch_listing(settings, "org/set", "main", cache=tmp_path)
    assert time.monotonic() - began < 10  # four stalls of 30 s: 120 s without the attempts' deadlines


# -- against a stand-in that behaves as the real hub is documented to ------------------------------------------------


def _needs(hub, *switches):
    """Skip until the stand-in has the switches (tests/standin_hub.py)."""
    missing = [name for name in switches if not hasattr(hub, name)]
    if missing:
        pytest.skip(f"the stand-in hub has no {', '.join(missing)} yet")


@pytest.fixture
def real_time(monkeypatch):
    """A pacer on the real clock, for a test against a stand-in whose quota windows pass in real time."""
    fresh = hub_quota.Pacer()
    monkeypatch.setattr(hub_quota, "PACER", fresh)
    return fresh


def test_eight_concurrent_readers_under_a_quota_with_truncated_resets_never_give_up(hub, real_time):
    _needs(hub, "quota", "calls")
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    window, limit, reads = 2.0, 8, 3
    hub.quota("resolvers", limit, window, rounding="floor")
    policy = RetryPolicy(total_wait_s=2.2 * window, base_s=window / 300, cap_s=window / 10)  # 660 s of 300, scaled
    counter, failures = RetryCounter(), []

    def reader(i: int) -> None:
        for k in range(reads):
            start = (i * reads + k) * 300
            try:
                assert (
                    get_range(_url(hub, commit), start, start + 8, token=False, policy=policy, counter=counter)
                    == (DATA[start : start + 8])
                )
            except HubError as err:
                failures.append(str(err))

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and hub.calls("resolvers") >= 8 * reads


def test_a_signed_link_that_expired_is_resolved_again(hub, monkeypatch):
    _needs(hub, "sign_links", "calls")
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.redirect_large(0)
    hub.sign_links(1)
    monkeypatch.setattr(hub_links, "LINKS", hub_links.LinkCache(clock=lambda: time.time() - 120))  # a clock behind
    policy = RetryPolicy(sleep=lambda s: None)
    assert get_range(_url(hub, commit), 0, 8, token=False, policy=policy) == DATA[:8]
    time.sleep(2.1)  # X-Amz-Date is whole seconds: the link lives ttl to ttl + 1 s
    counter = RetryCounter()
    assert get_range(_url(hub, commit), 8, 16, token=False, policy=policy, counter=counter) == DATA[8:16]
    assert hub.calls("resolvers") == 2 and hub.calls("cdn") == 3 and counter.summary() == "hub: no retries"


def test_a_signed_link_is_kept_for_reads_with_a_token_which_never_goes_to_the_cdn(hub, policy):
    _needs(hub, "sign_links", "calls")
    commit = hub.add_repo(REPO, {"model.safetensors": DATA}, gated_token="hf_right")
    hub.redirect_large(0)
    hub.sign_links(3600)  # a CDN that also gets Authorization answers 400
    for start in (0, 1000, 2000):
        got = get_range(_url(hub, commit), start, start + 8, token="hf_right", policy=policy)
        assert got == DATA[start : start + 8]
    assert hub.calls("resolvers") == 1 and hub.calls("cdn") == 3


def test_a_range_read_from_a_cdn_that_ignores_ranges_when_gzip_is_accepted_serves_the_range_and_no_more(hub, policy):
    _needs(hub, "cdn_gzip")
    big = SparseFile(64 << 20, {0: DATA})
    commit = hub.add_repo(REPO, {"big.safetensors": big})
    hub.redirect_large(0)
    hub.cdn_gzip(True)
    assert get_range(_url(hub, commit, "big.safetensors"), 32 << 20, (32 << 20) + 100, token=False, policy=policy) == (
        bytes(100)
    )
    assert hub.bytes_served_for(REPO, "big.safetensors") <= 100 + hub_client.RANGE_SLACK


def test_a_bogus_416_of_the_cdn_is_retried(hub, policy, counter):
    _needs(hub, "bogus_416_once")
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    hub.redirect_large(0)
    hub.bogus_416_once("model.safetensors")  # Content-Range: bytes */177
    got = get_range(_url(hub, commit), 500, 600, token=False, size=len(DATA), policy=policy, counter=counter)
    assert got == DATA[500:600] and counter.retries["server error"] == 1


def test_a_stale_token_stops_score_in_one_line_exit_2_after_a_few_requests(hub, repos, tmp_path, monkeypatch, capsys):
    _needs(hub, "known_tokens")
    from attnstruct import cli

    hub.add_folder("tiny/bert", repos["tiny/bert"])
    hub.known_tokens({"hf_valid"})
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_TOKEN", "hf_stale_not_known")
    status, err = cli.main(["score", "tiny/bert"]), capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "invalid token" in err and "HF_TOKEN" in err
    assert "hf_stale_not_known" not in err and len(hub.requests) <= 3


def test_a_whole_file_behind_a_redirect_with_xet_headers_comes_by_plain_http(hub, policy, tmp_path):
    _needs(hub, "sign_links")
    weights = bytes(range(256)) * 64
    commit = hub.add_repo(REPO, {"pytorch_model.bin": weights})
    hub.redirect_large(0)
    hub.sign_links(3600, xet=True)
    path = get_file(_url(hub, commit, "pytorch_model.bin"), tmp_path / "w.bin", token=False, what="w", policy=policy)
    assert path.read_bytes() == weights and not any("xet-read-token" in p for _, p, _ in hub.requests)


def test_a_request_makes_no_request_of_its_own_to_the_hubs_api(hub, policy, monkeypatch, tmp_path):
    """huggingface_hub's build_hf_headers asks the hub for its list of agent harnesses (GET /api/agent-harnesses, once
    a day per machine) to fill its user agent: a call of the metered API bucket outside the client's count."""
    import huggingface_hub.constants
    import huggingface_hub.utils._detect_agent as detect

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(huggingface_hub.constants, "AGENT_HARNESSES_PATH", str(tmp_path / "harnesses.json"))
    monkeypatch.setattr(detect, "_registry", None)
    commit = hub.add_repo(REPO, {"model.safetensors": DATA})
    url = f"{hub.url}/{REPO}/resolve/{commit}/model.safetensors"
    assert get_range(url, 0, 8, token="hf_right", policy=policy) == DATA[:8]
    assert [path for _, path, _ in hub.requests] == [f"/{REPO}/resolve/{commit}/model.safetensors"]
