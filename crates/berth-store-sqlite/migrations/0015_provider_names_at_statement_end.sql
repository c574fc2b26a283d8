-- Kept so that both adapters number their migrations alike. PostgreSQL writes a batch's updated
-- providers in one statement and checks their names' uniqueness at its end (its 0015); SQLite
-- writes them one at a time, in the order the batch decided them, so each row's check holds as
-- it is and nothing changes here.
SELECT 1;
