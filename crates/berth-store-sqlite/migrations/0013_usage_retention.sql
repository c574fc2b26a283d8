-- The usage history keeps a segment for a while after it ends: commits prune the segments
-- that ended longest ago, and a report reads those still running or ending after its period
-- begins, both through the index on `until`. The index on `since` is dropped: every segment
-- but the newest begins before a recent period ends, so it narrowed nothing.

DROP INDEX usage_segments_since;
CREATE INDEX usage_segments_until ON usage_segments (until);
