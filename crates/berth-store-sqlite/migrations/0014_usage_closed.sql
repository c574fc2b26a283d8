-- The usage history keeps closed segments alone, append-only: what a consumer or lease uses
-- from its last change on is worked out from the catalog, and a commit that changes it adds
-- what it used until then. Each segment carries the sequence of the commit that wrote it, so
-- that a report adds the segments up to the catalog it reads the open usage from. Nothing
-- looks a source up any more, and the segments written in the earlier form (open ones among
-- them) are dropped: the history begins again here.

DELETE FROM usage_segments;
DROP INDEX usage_segments_source;
ALTER TABLE usage_segments ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
