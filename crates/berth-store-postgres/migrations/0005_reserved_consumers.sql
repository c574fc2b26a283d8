-- The reservation a consumer's allocations count against, when it presented one (a lease's
-- reservation id). Consumers without one are unreserved and are kept out of fenced capacity.

ALTER TABLE consumers ADD COLUMN reservation_id UUID NULL;
