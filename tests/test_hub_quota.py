"""The hub's quotas obeyed before they refuse (attnstruct.hub_client.quota): requests counted by bucket, the pacer
that holds a bucket's requests when its window has nothing left, and the signed links kept while they are valid
(attnstruct.hub_client.links). Clocks are fake: nothing here sleeps."""

import calendar
import threading
import time

import pytest

from attnstruct.hub_client.links import DEFAULT_TTL_S, LinkCache, link_expiry, link_key
from attnstruct.hub_client.quota import CallCounter, Pacer, bucket_of
from attnstruct.hub_client.retry import RetryCounter, retry_after_s
from attnstruct.hub_client.stream import origin

HUB = "https://huggingface.co"
KEY = (origin(HUB), "resolvers")


class Clock:
    """A fake clock that a recorded sleep moves on."""

    def __init__(self, now: float = 1000.0):
        self.now, self.slept = now, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _said(r: int, t: int, q: int = 10, w: int = 300) -> dict[str, str]:
    return {"RateLimit": f'"resolvers";r={r};t={t}', "RateLimit-Policy": f'"fixed window";"resolvers";q={q};w={w}'}


@pytest.mark.parametrize(
    ("url", "bucket"),
    [
        (f"{HUB}/org/m/resolve/0123/model.safetensors", "resolvers"),
        (f"{HUB}/datasets/org/d/resolve/main/a.parquet", "resolvers"),
        (f"{HUB}/api/resolve-cache/models/org/m/0123/config.json", "resolvers"),
        (f"{HUB}/api/models/org/m/revision/main?blobs=true", "api"),
        (f"{HUB}/api/models/org/m/refs", "api"),
        ("https://cas-bridge.xethub.hf.co/xet-bridge-us/abc?X-Amz-Expires=3600", "cdn"),
    ],
)
def test_a_request_is_counted_in_the_bucket_of_its_path_or_as_cdn_on_another_origin(url, bucket):
    assert bucket_of(url, origin(HUB), origin(url)) == bucket


def test_the_call_counter_sums_over_threads_and_reads_in_one_line():
    calls = CallCounter()
    assert calls.summary() == "hub calls: 0 resolver, 0 API, 0 CDN"

    def add():
        for _ in range(1000):
            calls.add("cdn")
        calls.add("resolvers")

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    calls.add("api", 2)
    assert calls.calls == {"resolvers": 4, "api": 2, "cdn": 4000}
    assert calls.summary() == "hub calls: 4 resolver, 2 API, 4000 CDN"
    calls.reset()
    assert calls.calls == {"resolvers": 0, "api": 0, "cdn": 0}


def test_requests_go_without_a_hold_while_the_window_has_some_left():
    clock = Clock()
    pacer = Pacer(clock=clock)
    assert pacer.admit(KEY, clock.sleep, 660) == 0  # nothing said yet
    pacer.answered(KEY, _said(r=3, t=100))
    assert [pacer.admit(KEY, clock.sleep, 660) for _ in range(3)] == [0, 0, 0] and clock.slept == []


def test_with_nothing_left_a_request_is_held_to_the_windows_end_and_a_second_then_the_next_window_goes():
    clock = Clock()
    pacer = Pacer(clock=clock)
    pacer.answered(KEY, _said(r=2, t=7, q=3, w=10))
    assert [pacer.admit(KEY, clock.sleep, 660) for _ in range(2)] == [0, 0]
    assert pacer.admit(KEY, clock.sleep, 660) == 8.0 and clock.now == 1008.0  # t truncated: up to t + 1
    assert [pacer.admit(KEY, clock.sleep, 660) for _ in range(2)] == [0, 0]  # the next window's q = 3, 1 taken
    assert pacer.admit(KEY, clock.sleep, 660) == 10.0 and clock.slept == [8.0, 10.0]  # a window later


def test_a_429s_ratelimit_holds_the_other_requests_of_its_bucket_not_those_of_another():
    clock = Clock()
    pacer = Pacer(clock=clock)
    pacer.answered(KEY, _said(r=0, t=0))
    api = (origin(HUB), "api")
    assert pacer.admit(api, clock.sleep, 660) == 0
    assert pacer.admit(KEY, clock.sleep, 660) == 1.0  # t = 0 is up to a second


def test_the_lowest_remaining_of_a_window_is_kept_and_a_later_window_replaces_it():
    clock = Clock()
    pacer = Pacer(clock=clock)
    pacer.answered(KEY, _said(r=1, t=50))
    pacer.answered(KEY, _said(r=5, t=49))  # an answer that left the hub before the first: the same window
    assert pacer.admit(KEY, clock.sleep, 660) == 0
    pacer.release(KEY)
    assert pacer.admit(KEY, clock.sleep, 660) == 50.0  # the earlier end of the two said
    pacer.release(KEY)
    clock.now += 100
    pacer.answered(KEY, _said(r=5, t=200))  # a window that began after the one held for
    assert [pacer.admit(KEY, clock.sleep, 660) for _ in range(5)] == [0] * 5


def test_a_hold_longer_than_the_requests_budget_is_not_begun():
    clock = Clock()
    pacer = Pacer(clock=clock)
    pacer.answered(KEY, _said(r=0, t=299))
    assert pacer.admit(KEY, clock.sleep, 100.0) == 0 and clock.slept == []  # the hub's 429 and the bounds decide
    assert pacer.admit(KEY, clock.sleep, 300.0) == 300.0


def test_threads_share_one_window_and_only_those_past_its_remaining_are_held():
    clock = Clock()
    pacer = Pacer(clock=clock)
    pacer.answered(KEY, _said(r=5, t=30, q=5, w=60))
    lock, waited = threading.Lock(), []

    def sleep(seconds: float) -> None:
        time.sleep(0.01)

    def read():
        wait = pacer.admit(KEY, sleep, 660)
        with lock:
            waited.append(wait)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(waited) == [0] * 5 + [31.0] * 3


def test_a_429_waits_the_ratelimit_reset_and_a_second_or_retry_after_as_given():
    assert retry_after_s({"RateLimit": '"resolvers";r=0;t=0'}) == 1.0
    assert retry_after_s({"RateLimit": '"resolvers";r=0;t=55', "Retry-After": "7"}) == 7.0
    assert retry_after_s({"RateLimit": '"resolvers";r=3;t=55'}) is None


def test_the_pacers_holds_are_waits_but_not_retries_in_the_one_line():
    counter = RetryCounter()
    counter.add("paced", 3.0)
    assert counter.summary() == "hub: no retries, 1 paced, 3.0 s waited"
    counter.add("rate limited", 1.5)
    assert counter.summary() == "hub: 1 retry (1 rate limited), 1 paced, 4.5 s waited"


def _signed(date: str, expires: int) -> str:
    return f"https://cas-bridge.xethub.hf.co/x/abc?X-Amz-Algorithm=AWS4&X-Amz-Date={date}&X-Amz-Expires={expires}"


def test_a_links_expiry_is_read_from_its_signature_or_cloudfronts_expires_or_an_hour_after_it_was_had():
    signed = calendar.timegm((2025, 7, 1, 12, 0, 0))
    assert link_expiry(_signed("20250701T120000Z", 3600), had_at=0) == signed + 3600
    assert link_expiry("https://cdn-lfs.hf.co/x?Expires=1751378400&Signature=s", had_at=0) == 1751378400
    assert link_expiry("https://cdn.example/x", had_at=500.0) == 500.0 + DEFAULT_TTL_S
    assert link_expiry(_signed("not a date", 3600), had_at=5.0) == 5.0 + DEFAULT_TTL_S


def test_a_kept_link_is_handed_back_until_a_minute_before_it_expires():
    signed = calendar.timegm((2025, 7, 1, 12, 0, 0))
    clock = Clock(now=signed + 10)
    links, key = LinkCache(clock=clock), link_key(f"{HUB}/org/m/resolve/0123/model.safetensors", None)
    links.put(key, _signed("20250701T120000Z", 3600))
    clock.now = signed + 3539
    assert links.get(key) == _signed("20250701T120000Z", 3600)
    clock.now = signed + 3540
    assert links.get(key) is None and len(links) == 0


def test_a_link_is_kept_per_token_and_the_token_itself_is_not_kept():
    url = f"{HUB}/org/m/resolve/0123/model.safetensors"
    links = LinkCache()
    links.put(link_key(url, "hf_secret"), "https://cdn.example/x")
    assert links.get(link_key(url, "hf_secret")) == "https://cdn.example/x"
    assert links.get(link_key(url, "hf_other")) is None and links.get(link_key(url, None)) is None
    assert "hf_secret" not in repr(link_key(url, "hf_secret"))


def test_the_cache_keeps_the_most_recently_used_links_up_to_its_size():
    links = LinkCache(size=2)
    keys = [link_key(f"{HUB}/org/m/resolve/0123/f{i}", None) for i in range(3)]
    links.put(keys[0], "https://cdn.example/0")
    links.put(keys[1], "https://cdn.example/1")
    assert links.get(keys[0]) is not None  # used: the other is the oldest now
    links.put(keys[2], "https://cdn.example/2")
    assert [links.get(key) is not None for key in keys] == [True, False, True]


def test_requests_on_their_way_are_taken_from_what_the_hub_says_is_left():
    clock = Clock()
    pacer = Pacer(clock=clock)
    assert [pacer.admit(KEY, clock.sleep, 660) for _ in range(4)] == [0] * 4  # nothing said yet: all go
    pacer.answered(KEY, _said(r=5, t=100))  # the first answer: three of ours are still on their way
    assert [pacer.admit(KEY, clock.sleep, 660) for _ in range(2)] == [0, 0]
    assert pacer.admit(KEY, clock.sleep, 660) == 101.0
    pacer.release(KEY)  # an attempt that ended without an answer is no longer on its way
